"""Push an exported folder to the Hugging Face Hub: refuse pickles, check it loads, then create + upload.

The token comes from `HF_TOKEN` or the login cache (`huggingface_hub.get_token()`) and is passed straight to
`HfApi`; it is never printed or logged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import timm
import torch
from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError
from safetensors.torch import load_file

from plstitch_eval.errors import PlstitchError, PublishError
from plstitch_eval.hub.temporal_head import HEAD_WEIGHTS_FILE, load_temporal_head
from plstitch_eval.hub.timm_format import CONFIG_NAME, WEIGHTS_NAME, is_timm_dir
from plstitch_eval.utils.console import logger

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
    except (HfHubHTTPError, OSError, ValueError) as exc:
        message = str(exc).replace(token, "***")
        raise PublishError(
            f"Upload of {folder} to {repo_id}@{revision} failed: {message}. Check that the token has write "
            "access to the organisation and that you are online."
        ) from None
    commit_url = getattr(commit, "commit_url", None) or str(commit)
    logger.info("Uploaded %d files to %s@%s", len(files), repo_id, revision)
    return PushResult(repo_id, revision, files, commit_url, dry_run=False)


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
