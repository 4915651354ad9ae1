"""Push an exported folder to the Hugging Face Hub: refuse pickles, check it loads and that its results belong
to its weights, then create + upload (`plstitch_eval.hub.upload`, which probes share).

The token comes from `HF_TOKEN` or the login cache (`huggingface_hub.get_token()`) and is passed straight to
`HfApi`; it is never printed or logged. Hub failures (no network, a wrong `HF_ENDPOINT`, offline mode, an HTTP
error) become one `PublishError` line naming the host and the fix.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import timm
import torch
import yaml
from huggingface_hub import ModelCard
from safetensors.torch import load_file

from plstitch_eval.errors import PlstitchError, PublishError
from plstitch_eval.hub.ranking_head import HEAD_WEIGHTS_FILE, load_temporal_head
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.hub.timm_format import CONFIG_NAME, WEIGHTS_NAME, is_timm_dir
from plstitch_eval.hub.upload import (
    PICKLE_SUFFIXES,
    PushResult,
    UploadFile,
    check_repo_id,
    format_file_table,
    hub_failure,
    list_upload_files,
    refuse_pickles,
    resolve_token,
    upload_folder,
)
from plstitch_train.publishing.cards import eval_results_from_results
from plstitch_train.publishing.export import CARD_NAME, METADATA_NAME

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
    "upload_folder",
]


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
    check_repo_id(repo_id)
    files = list_upload_files(folder)
    refuse_pickles(files, folder)
    check_folder_loads(folder)
    check_results_belong(folder)
    if dry_run:
        return PushResult(repo_id, revision, files, None, dry_run=True)
    message = commit_message or f"Upload PL-Stitch model ({len(files)} files)"
    commit_url = upload_folder(
        folder, files, repo_id, private=private, revision=revision, commit_message=message, token=token
    )
    return PushResult(repo_id, revision, files, commit_url, dry_run=False)
