"""Push an exported folder to the Hugging Face Hub: refuse pickles, check it loads and that its results belong
to its weights, then create + upload.

The token comes from `HF_TOKEN` or the login cache (`huggingface_hub.get_token()`) and is passed straight to
`HfApi`; it is never printed or logged. Hub failures (no network, a wrong `HF_ENDPOINT`, offline mode, an HTTP
error) become one `PublishError` line naming the host and the fix.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import timm
import torch
import yaml
from huggingface_hub import HfApi, ModelCard, get_token
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled
from safetensors.torch import load_file

from plstitch_eval.errors import PlstitchError, PublishError
from plstitch_eval.hub.ranking_head import HEAD_WEIGHTS_FILE, load_temporal_head
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.hub.timm_format import CONFIG_NAME, WEIGHTS_NAME, is_timm_dir
from plstitch_eval.utils.console import logger
from plstitch_train.publishing.cards import eval_results_from_results
from plstitch_train.publishing.export import CARD_NAME, METADATA_NAME

try:  # huggingface_hub 2.x talks HTTP through httpx2 (1.x: httpx); its transport errors reach us unwrapped
    from httpx2 import HTTPError as ClientHTTPError
    from httpx2 import TransportError as ClientTransportError
except ImportError:  # pragma: no cover - older huggingface_hub
    try:
        from httpx import HTTPError as ClientHTTPError
        from httpx import TransportError as ClientTransportError
    except ImportError:  # huggingface_hub 0.x: requests, whose errors are OSErrors
        ClientHTTPError, ClientTransportError = OSError, ConnectionError

__all__ = [
    "PICKLE_SUFFIXES",
    "PushResult",
    "UploadFile",
    "check_folder_loads",
    "check_results_belong",
    "format_file_table",
    "hub_failure",
    "list_upload_files",
    "push_to_hub",
    "refuse_pickles",
    "resolve_token",
]

PICKLE_SUFFIXES = (".pth", ".pt", ".bin", ".pkl", ".pickle", ".ckpt")


@dataclass(frozen=True)
class UploadFile:
    """One file that would be uploaded: path inside the folder (POSIX) and size in bytes."""

    path: str
    size: int


@dataclass(frozen=True)
class PushResult:
    """What `push_to_hub` did: the files, and the commit URL (None on a dry run)."""

    repo_id: str
    revision: str
    files: list[UploadFile]
    commit_url: str | None
    dry_run: bool


def list_upload_files(folder: str | os.PathLike) -> list[UploadFile]:
    """Every regular file under `folder` (hidden files and folders skipped), sorted by path."""
    folder = Path(folder)
    files = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        files.append(UploadFile(rel.as_posix(), path.stat().st_size))
    return files


def refuse_pickles(files: list[UploadFile], folder: Path) -> None:
    """Raise `PublishError` naming the first pickle (.pth/.pt/.bin/.pkl/.ckpt): publish safetensors only."""
    for item in files:
        if item.path.lower().endswith(PICKLE_SUFFIXES):
            raise PublishError(
                f"Refusing to upload {folder / item.path}: pickle files can run code when loaded. Remove it "
                "and publish safetensors only (`plstitch export` writes model.safetensors)."
            )


def check_folder_loads(folder: str | os.PathLike) -> None:
    """Plain timm must rebuild the model from `config.json` and the weights must fill it exactly (strict).

    Also loads the temporal head when the folder has one.
    """
    folder = Path(folder).resolve()
    if not is_timm_dir(folder):
        raise PublishError(
            f"{folder} lacks {CONFIG_NAME} or {WEIGHTS_NAME}; create it with "
            "`plstitch export RUN_DIR --out DIR`."
        )
    try:
        model = timm.create_model(f"local-dir:{folder}", pretrained=True)
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:
        raise PublishError(f"{folder} does not load with timm.create_model('local-dir:...'): {exc}") from exc
    state = load_file(str(folder / WEIGHTS_NAME))
    expected = model.state_dict()
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise PublishError(
            f"{folder / WEIGHTS_NAME} does not match {CONFIG_NAME}: missing {missing[:10]}, unexpected "
            f"{unexpected[:10]}; re-export the folder."
        )
    for key, tensor in state.items():
        if not torch.equal(expected[key], tensor):
            raise PublishError(f"{folder / WEIGHTS_NAME}: tensor {key!r} did not load as stored; re-export.")
    if (folder / HEAD_WEIGHTS_FILE).is_file():
        try:
            load_temporal_head(folder)
        except PlstitchError as exc:
            raise PublishError(f"{folder}: temporal head does not load: {exc}") from exc


def check_results_belong(folder: str | os.PathLike) -> None:
    """Results in `plstitch.json` and the card's `model-index` must still belong to `model.safetensors`.

    Why: `plstitch export` checked them against the weights it wrote; a weights file swapped afterwards, a
    `plstitch.json` copied from another export or numbers typed into README.md would publish wrong numbers.
    """
    folder = Path(folder)
    meta = _read_metadata(folder / METADATA_NAME)
    results = meta.get("results") or []
    card = _card_results(folder / CARD_NAME)
    if not results and not card:
        return
    reexport = f"re-export it: `plstitch export RUN --out {folder} --overwrite --results FILE ...`"
    if not meta:
        raise PublishError(
            f"{folder / CARD_NAME} lists evaluation results but {folder} has no {METADATA_NAME} recording "
            f"which weights they were measured on; {reexport}."
        )
    if results:
        _check_recorded_weights(folder, meta, results, reexport)
    try:
        recorded = {_result_key(r) for r in eval_results_from_results(results)}
        extra = [r for r in card if _result_key(r) not in recorded]
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise PublishError(
            f"{folder}: malformed results in {METADATA_NAME} or {CARD_NAME} ({exc!r}); {reexport}."
        ) from None
    if extra:
        first = extra[0]
        raise PublishError(
            f"{folder / CARD_NAME} lists {len(extra)} evaluation result(s) that {METADATA_NAME} does not "
            f"record for these weights (e.g. {first.metric_type} {first.metric_value} on "
            f"{first.dataset_type}); {reexport}."
        )


def _check_recorded_weights(folder: Path, meta: dict[str, Any], results: list[Any], reexport: str) -> None:
    """The weights the export checked the results against are still `model.safetensors`, and every result
    was measured on them (or on the source file that held them)."""
    weights = sha256_file(folder / WEIGHTS_NAME)
    checked = meta.get("weights_sha256")
    if checked != weights:
        against = f"weights sha256 {checked[:16]}" if checked else "no recorded weights (an older export)"
        raise PublishError(
            f"{folder / METADATA_NAME} holds results checked against {against}, but {folder / WEIGHTS_NAME} "
            f"has sha256 {weights[:16]}; {reexport}."
        )
    accepted = {checked, (meta.get("source") or {}).get("weights_sha256")} - {None}
    for result in results:
        measured = (result.get("model") or {}).get("weights_sha256") if isinstance(result, dict) else None
        if measured not in accepted:
            name = result.get("file") if isinstance(result, dict) else None
            raise PublishError(
                f"{folder / METADATA_NAME}: results {name!r} were measured on weights sha256 "
                f"{str(measured)[:16]}, not on this folder's {WEIGHTS_NAME}; {reexport}."
            )


def _read_metadata(path: Path) -> dict[str, Any]:
    """plstitch.json as a dict ({} without one); an unreadable file is a `PublishError` naming it."""
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PublishError(f"{path} is not readable JSON ({exc}); re-export the folder.") from None
    if not isinstance(meta, dict):
        raise PublishError(f"{path} holds a {type(meta).__name__}, not an export record; re-export it.")
    return meta


def _card_results(path: Path) -> list[Any]:
    """The `EvalResult`s of a card's `model-index` ([] without a card or results)."""
    if not path.is_file():
        return []
    try:
        return list(ModelCard.load(path).data.eval_results or [])
    except (ValueError, TypeError, KeyError, OSError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split())
        raise PublishError(f"{path}: its metadata does not parse ({detail}); re-export the folder.") from None


def _result_key(result: Any) -> tuple[str, str, float]:
    return (str(result.dataset_type), str(result.metric_type), round(float(result.metric_value), 4))


def resolve_token(token: str | None = None) -> str:
    """`token`, else `HF_TOKEN`, else the login cache; a clear error naming the fix when there is none."""
    token = token or os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise PublishError(
            "No Hugging Face token found. Run `hf auth login` (or `huggingface-cli login`), or set the "
            "HF_TOKEN environment variable to a token with write access."
        )
    return token


def push_to_hub(
    folder: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str = "main",
    commit_message: str | None = None,
    dry_run: bool = False,
    token: str | None = None,
) -> PushResult:
    """Check `folder` (no pickles, loads with timm strictly), then create `repo_id` and upload the folder.

    A dry run performs the checks and lists the files, and contacts nobody.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise PublishError(f"{folder} is not a folder; pass the output of `plstitch export`.")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PublishError(f"--repo-id {repo_id!r} must look like ORG/NAME.")
    files = list_upload_files(folder)
    refuse_pickles(files, folder)
    check_folder_loads(folder)
    check_results_belong(folder)
    if dry_run:
        return PushResult(repo_id, revision, files, None, dry_run=True)
    token = resolve_token(token)
    api = HfApi(token=token)
    try:
        api.create_repo(repo_id=repo_id, repo_type="model", private=private, exist_ok=True)
        if revision != "main":
            api.create_branch(repo_id=repo_id, branch=revision, repo_type="model", exist_ok=True)
        commit = api.upload_folder(
            repo_id=repo_id,
            folder_path=str(folder),
            repo_type="model",
            revision=revision,
            commit_message=commit_message or f"Upload PL-Stitch model ({len(files)} files)",
            allow_patterns=[item.path for item in files],
        )
    except (ClientHTTPError, OSError, ValueError) as exc:  # HfHubHTTPError, ConnectError, offline mode...
        raise hub_failure(exc, api.endpoint, f"{folder} to {repo_id}@{revision}", token) from None
    commit_url = getattr(commit, "commit_url", None) or str(commit)
    logger.info("Uploaded %d files to %s@%s", len(files), repo_id, revision)
    return PushResult(repo_id, revision, files, commit_url, dry_run=False)


def hub_failure(exc: BaseException, endpoint: str, what: str, token: str) -> PublishError:
    """One line for a failed Hub call: the host it tried, what happened (token masked), and the fix."""
    host = urlparse(endpoint).hostname or endpoint
    # the host actually tried (uploads may go to a storage host); httpx raises RuntimeError without a request
    with contextlib.suppress(AttributeError, RuntimeError):
        host = exc.request.url.host or host
    detail = " ".join(str(exc).replace(token, "***").split()) or type(exc).__name__
    if isinstance(exc, OfflineModeIsEnabled):
        return PublishError(
            f"Cannot upload {what}: offline mode is on (HF_HUB_OFFLINE=1), so {host} was not contacted; "
            "unset HF_HUB_OFFLINE and retry."
        )
    if isinstance(exc, HfHubHTTPError):
        return PublishError(
            f"Upload of {what} failed: {host} answered {detail}. Check that the token (HF_TOKEN or `hf auth "
            f"login`) has write access to the organisation, and that HF_ENDPOINT ({endpoint}) is the Hub "
            "you mean."
        )
    if isinstance(exc, ClientTransportError | ConnectionError | TimeoutError):
        return PublishError(
            f"Cannot reach {host} to upload {what} ({type(exc).__name__}: {detail}). Check the network "
            f"connection (and proxy), the HF_ENDPOINT setting (now {endpoint}), and that HF_TOKEN holds a "
            "valid token."
        )
    return PublishError(
        f"Upload of {what} via {host} failed ({type(exc).__name__}: {detail}). Check that the token has "
        f"write access to the organisation and that {host} is reachable."
    )


def format_file_table(files: list[UploadFile]) -> str:
    """Plain-text table of paths and human-readable sizes, with a total line."""
    width = max([len(item.path) for item in files] + [4])
    lines = [f"{'file':<{width}}  {'size':>10}"]
    lines += [f"{item.path:<{width}}  {_human(item.size):>10}" for item in files]
    lines.append(f"{'total':<{width}}  {_human(sum(item.size for item in files)):>10}")
    return "\n".join(lines)


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
