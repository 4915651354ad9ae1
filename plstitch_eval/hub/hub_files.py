"""Fetching weights through the Hugging Face cache (offline-aware) and recording where they came from."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import huggingface_hub
from huggingface_hub import constants as hf_constants
from huggingface_hub import errors as hf_errors

from plstitch_eval.errors import ModelNotFoundError
from plstitch_eval.hub.spec import hub_spec
from plstitch_eval.hub.spec import parse_hf_spec as parse_hf_spec  # its old home: callers import it here

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


def commit_of(path: str | Path, filename: str) -> str | None:
    """The snapshot commit hash a cached file lives under (`.../snapshots/<commit>/<filename>`)."""
    snapshot = Path(path)
    for _ in Path(filename).parts:
        snapshot = snapshot.parent
    return snapshot.name if _COMMIT_RE.match(snapshot.name) else None


class HubUnreachableError(ModelNotFoundError):
    """The Hub (HF_ENDPOINT) did not answer and the file is not cached: other files of it would fail alike."""


def fetch_file(
    repo_id: str,
    filename: str,
    *,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
    fix_hint: str | None = None,
) -> HubFile:
    """Download (or find in the cache when offline) one file of a model repo, else `ModelNotFoundError`.

    A file not in the cache is first asked for with one HEAD request and no retries: when the Hub cannot be
    reached, `hf_hub_download` would retry for ~30 s with a warning a line before failing the same way.
    """
    cache = str(cache_dir) if cache_dir else None
    hint = fix_hint or f"`plstitch download {hub_spec(repo_id, filename)}`"
    where = f"File {filename!r} of Hub repo {repo_id!r} at revision {revision or 'main'!r}"
    if not hf_constants.is_offline_mode() and not is_cached(
        repo_id, filename, revision=revision, cache_dir=cache_dir
    ):
        unreachable = _hub_unreachable(repo_id, filename, revision)
        if unreachable is not None:
            raise HubUnreachableError(
                f"{where} is not in the cache {cache or hf_constants.HF_HUB_CACHE} and {unreachable}. "
                f"Fix: run {hint} on a machine with network (same cache dir), point HF_ENDPOINT at a "
                "reachable Hub mirror, or pass a local path to the weights."
            )
    try:
        local = huggingface_hub.hf_hub_download(repo_id, filename, revision=revision, cache_dir=cache)
    except _HUB_ERRORS as exc:
        cached_in = f"{where} is not in the cache {cache or hf_constants.HF_HUB_CACHE}"
        if hf_constants.is_offline_mode():
            raise ModelNotFoundError(
                f"{cached_in} and HF_HUB_OFFLINE is set. Fix: run {hint} on a machine with network and "
                "HF_HUB_OFFLINE unset (same cache dir), or pass a local path to the weights."
            ) from exc
        cause = exc if isinstance(exc, hf_errors.HfHubHTTPError) else exc.__cause__
        if isinstance(cause, hf_errors.GatedRepoError):  # 401/403 from a repo that asks to accept a licence
            raise ModelNotFoundError(gated_repo_message(repo_id, filename, hint)) from exc
        if isinstance(cause, hf_errors.HfHubHTTPError):  # the Hub answered (perhaps wrapped by hf)
            raise ModelNotFoundError(
                f"{cached_in} and the Hub refused it ({_first_line(cause)}). Fix: check the repo id, file "
                "name and revision (a private or gated repo needs HF_TOKEN), or pass a local path to the "
                "weights."
            ) from exc
        raise ModelNotFoundError(
            f"{cached_in} and could not be fetched ({_first_line(exc)}). Fix: run {hint} on a machine with "
            "network (same cache dir), or pass a local path to the weights."
        ) from exc
    return HubFile(Path(local), repo_id, filename, revision, commit_of(local, filename))


def gated_repo_message(repo_id: str, filename: str, hint: str) -> str:
    """The one line for a gated repo (DINOv3's facebook/* repos): where to accept the licence, what to set."""
    return (
        f"File {filename!r} of Hub repo {repo_id!r} is gated: its authors ask each user to accept their "
        f"licence first. Fix: log in at {hf_constants.ENDPOINT}/{repo_id}, accept the licence there, set "
        f"HF_TOKEN to an access token of that account (huggingface.co/settings/tokens) and run {hint} again "
        "(approval may take a while)."
    )


def _hub_unreachable(repo_id: str, filename: str, revision: str | None) -> str | None:
    """Why one HEAD request for the file got no HTTP answer (connection refused, DNS, timeout), else None.

    Any answer (200, 404, 401...) returns None: `hf_hub_download` then reports it in its own words.
    """
    url = huggingface_hub.hf_hub_url(repo_id, filename, revision=revision)
    try:
        huggingface_hub.get_hf_file_metadata(url, timeout=hf_constants.HF_HUB_ETAG_TIMEOUT)
    except hf_errors.HfHubHTTPError:  # the Hub answered
        return None
    except Exception as exc:  # transport errors of whichever HTTP client huggingface_hub uses
        host = urlsplit(url)
        return f"the Hub at {host.scheme}://{host.netloc} cannot be reached ({_first_line(exc)})"
    return None


def _first_line(exc: BaseException) -> str:
    """`Type: first line of the message` (huggingface_hub's messages run over several lines)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0].rstrip('.')}" if lines else type(exc).__name__


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
        except HubUnreachableError:  # the other spellings cannot be fetched either
            raise
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
    try:
        found = huggingface_hub.try_to_load_from_cache(
            repo_id, filename, cache_dir=str(cache_dir) if cache_dir else None, revision=revision
        )
    except hf_errors.HFValidationError:  # a malformed repo id: hf_hub_download reports it
        return False
    return isinstance(found, str)
