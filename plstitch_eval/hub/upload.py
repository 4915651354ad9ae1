"""Uploading a checked folder to the Hugging Face Hub: the file list, the token, one `HfApi` commit, and the
one-line `PublishError` of a failed Hub call.

Why here: both kinds of published folder use it - an exported backbone (`plstitch_train.publishing`) and a
probe (`plstitch_eval.probes.publish`). The token comes from `HF_TOKEN` or the login cache
(`huggingface_hub.get_token()`) and is passed straight to `HfApi`; it is never printed or logged.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

from plstitch_eval.errors import PublishError
from plstitch_eval.utils.console import logger

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
    "check_repo_id",
    "format_file_table",
    "hub_failure",
    "list_upload_files",
    "refuse_pickles",
    "resolve_token",
    "upload_folder",
]

PICKLE_SUFFIXES = (".pth", ".pt", ".bin", ".pkl", ".pickle", ".ckpt")


@dataclass(frozen=True)
class UploadFile:
    """One file that would be uploaded: path inside the folder (POSIX) and size in bytes."""

    path: str
    size: int


@dataclass(frozen=True)
class PushResult:
    """What a push did: the files, and the commit URL (None on a dry run)."""

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


def check_repo_id(repo_id: str) -> str:
    """`repo_id` when it reads ORG/NAME, else a one-line `PublishError`."""
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PublishError(f"--repo-id {repo_id!r} must look like ORG/NAME.")
    return repo_id


def resolve_token(token: str | None = None) -> str:
    """`token`, else `HF_TOKEN`, else the login cache; a clear error naming the fix when there is none."""
    token = token or os.environ.get("HF_TOKEN") or get_token()
    if not token:
        raise PublishError(
            "No Hugging Face token found. Run `hf auth login` (or `huggingface-cli login`), or set the "
            "HF_TOKEN environment variable to a token with write access."
        )
    return token


def upload_folder(
    folder: Path,
    files: list[UploadFile],
    repo_id: str,
    *,
    private: bool,
    revision: str,
    commit_message: str,
    token: str | None = None,
    source: Path | None = None,
) -> str:
    """Create `repo_id` (and branch `revision`) if needed and upload exactly `files` of `folder` in one
    commit; returns the commit URL. A failed Hub call is one `PublishError` line (`hub_failure`) naming
    `source`, the folder the user gave, when `folder` is a staging copy written from it (a probe's)."""
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
            commit_message=commit_message,
            allow_patterns=[item.path for item in files],
        )
    except (ClientHTTPError, OSError, ValueError) as exc:  # HfHubHTTPError, ConnectError, offline mode...
        raise hub_failure(exc, api.endpoint, f"{source or folder} to {repo_id}@{revision}", token) from None
    logger.info("Uploaded %d files to %s@%s", len(files), repo_id, revision)
    return getattr(commit, "commit_url", None) or str(commit)


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
