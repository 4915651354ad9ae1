"""Fetching weights through the Hugging Face cache (offline-aware) and recording where they came from."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import huggingface_hub
from huggingface_hub import errors as hf_errors

from plstitch_eval.errors import ConfigError, ModelNotFoundError

_COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
_HUB_ERRORS = (
    hf_errors.HfHubHTTPError,
    hf_errors.LocalEntryNotFoundError,
    hf_errors.EntryNotFoundError,
    hf_errors.OfflineModeIsEnabled,
    hf_errors.HFValidationError,
    OSError,
    ValueError,
)


@dataclass(frozen=True)
class HubFile:
    """A file resolved in the HF cache: local path plus repo, filename, asked revision and resolved commit."""

    path: Path
    repo_id: str
    filename: str
    revision: str | None
    commit: str | None


def parse_hf_spec(spec: str) -> tuple[str, str | None, str | None]:
    """`hf-hub:ORG/NAME[@REV]` or `hf-hub:ORG/NAME[@REV]/FILE` -> (repo_id, filename|None, revision|None)."""
    rest = spec.removeprefix("hf-hub:")
    parts = rest.split("/", 2)
    if len(parts) < 2 or not all(parts[:2]):
        raise ConfigError(f"Bad Hub spec {spec!r}; use hf-hub:ORG/NAME or hf-hub:ORG/NAME/FILE.")
    name, _, revision = parts[1].partition("@")
    filename = parts[2] if len(parts) == 3 and parts[2] else None
    return f"{parts[0]}/{name}", filename, revision or None


def commit_of(path: str | Path, filename: str) -> str | None:
    """The snapshot commit hash a cached file lives under (`.../snapshots/<commit>/<filename>`)."""
    snapshot = Path(path)
    for _ in Path(filename).parts:
        snapshot = snapshot.parent
    return snapshot.name if _COMMIT_RE.match(snapshot.name) else None


def fetch_file(
    repo_id: str,
    filename: str,
    *,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    fix_hint: str | None = None,
) -> HubFile:
    """Download (or find in the cache when offline) one file of a model repo, else `ModelNotFoundError`."""
    try:
        local = huggingface_hub.hf_hub_download(
            repo_id, filename, revision=revision, cache_dir=str(cache_dir) if cache_dir else None
        )
    except _HUB_ERRORS as exc:
        offline = " (HF_HUB_OFFLINE is set)" if huggingface_hub.constants.is_offline_mode() else ""
        cache = cache_dir or huggingface_hub.constants.HF_HUB_CACHE
        hint = fix_hint or f"`plstitch download hf-hub:{repo_id}/{filename}`"
        raise ModelNotFoundError(
            f"File {filename!r} of Hub repo {repo_id!r} at revision {revision or 'main'!r} "
            "is not in the cache "
            f"{cache} and could not be fetched{offline}: {type(exc).__name__}. Fix: run {hint} on a machine "
            "with network (same cache dir), or pass a local path to the weights."
        ) from exc
    return HubFile(Path(local), repo_id, filename, revision, commit_of(local, filename))


def fetch_first(
    repo_id: str,
    filenames: Sequence[str],
    *,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    fix_hint: str | None = None,
) -> HubFile:
    """`fetch_file` of the first of `filenames` that exists (spellings of one file: Hub names are
    case-sensitive); the first name's error, naming every spelling tried, when none does."""
    first_error: ModelNotFoundError | None = None
    for name in filenames:
        try:
            return fetch_file(repo_id, name, revision=revision, cache_dir=cache_dir, fix_hint=fix_hint)
        except ModelNotFoundError as exc:
            first_error = first_error or exc
    if first_error is None:
        raise ModelNotFoundError(f"No file name given for Hub repo {repo_id!r}.")
    if len(filenames) == 1:
        raise first_error
    tried = ", ".join(repr(n) for n in filenames)
    raise ModelNotFoundError(f"{first_error} (spellings tried: {tried})") from first_error


def is_cached(
    repo_id: str, filename: str, *, revision: str | None = None, cache_dir: str | Path | None = None
) -> bool:
    """True when the file is already in the HF cache (no network)."""
    found = huggingface_hub.try_to_load_from_cache(
        repo_id, filename, cache_dir=str(cache_dir) if cache_dir else None, revision=revision
    )
    return isinstance(found, str)
