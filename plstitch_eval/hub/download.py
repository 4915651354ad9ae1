"""Filling the Hugging Face cache for a model (what `plstitch download` does) and checking what is cached."""

from __future__ import annotations

import os
from pathlib import Path

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub import timm_format
from plstitch_eval.hub.hub_files import HubFile, fetch_file, fetch_first, is_cached
from plstitch_eval.hub.registry import MODELS, ModelEntry, did_you_mean
from plstitch_eval.hub.spec import HF_HUB_FILE_FORM, parse_spec
from plstitch_eval.registry import SHIPPED_PACKAGE

_RETRY_HINT = "this download again"


def hub_files_of(spec: str) -> tuple[str, list[str], str | None, str]:
    """(repo_id, files to fetch, revision in the spec, fix hint) for a registry name or an hf-hub spec."""
    parsed = parse_spec(spec)
    if parsed.kind == "registry":
        entry = parsed.entry
        if not entry.has_weights:
            raise ConfigError(
                f"Model {spec!r} has no weights to download: it is built in (`plstitch models`)."
            )
        if entry.repo_id is None:
            where = entry.local_path or (f"${entry.path_env}" if entry.path_env else "a local path")
            fix = f" Set ${entry.path_env} to its checkpoint file." if entry.path_env else ""
            raise ConfigError(
                f"Model {spec!r} is not on the Hugging Face Hub; its weights come from {where}.{fix}"
            )
        return entry.repo_id, _entry_files(entry), None, _RETRY_HINT
    if parsed.kind == "hf-hub" and parsed.repo_id is not None:
        files = [parsed.filename] if parsed.filename else [timm_format.CONFIG_NAME, timm_format.WEIGHTS_NAME]
        return parsed.repo_id, files, parsed.revision, _RETRY_HINT
    raise ConfigError(
        f"Unknown model {spec!r}.{did_you_mean(spec)} Use a name from `plstitch models` or "
        f"{HF_HUB_FILE_FORM}."
    )


def local_weights(spec: str) -> list[Path] | None:
    """The weights a registry model has without any download: `[path]` for a local path (shipped with the
    package, or named by its environment variable), `[]` for a built-in encoder (no weights); None when the
    model's weights come from the Hub (or `spec` is not a registry name).

    Why: `plstitch download` of such a model has nothing to fetch; it says so and succeeds. A local path that
    is named but missing is refused, naming the path and the fix (unless the Hub has the weights too).
    """
    entry = MODELS.get(spec)
    if entry is None:
        return None
    if not entry.has_weights:
        return []
    local = entry.resolve_local_path()
    if local is None or (entry.repo_id is not None and not local.exists()):  # from the Hub then
        return None
    if not local.exists():
        where, fix = missing_weights_fix(spec, entry, local)
        raise ConfigError(f"Model {spec!r}: its weights should be at {where}, which does not exist; {fix}.")
    return [local]


def missing_weights_fix(name: str, entry: ModelEntry, local: Path) -> tuple[str, str]:
    """(where the weights were looked for, the fix) for a registry model whose local weights are missing: the
    variable that named them, else the package whose folder holds them - plstitch's shipped models come with
    plstitch, a plugin's encoder with its own package (`MODELS.package`), never plstitch."""
    if (entry.path_env and os.environ.get(entry.path_env)) or not entry.local_path:
        return f"{local} (${entry.path_env})", f"point ${entry.path_env} at the checkpoint"
    package = MODELS.package(name)
    if package == SHIPPED_PACKAGE:
        return str(local), "reinstall plstitch (the folder ships with the package)"
    also = f", or point ${entry.path_env} at them" if entry.path_env else ""
    return str(local), (
        f"the encoder comes from package {package!r}: make or install its weights as that package's "
        f"documentation says (or reinstall {package}){also}"
    )


def _entry_files(entry: ModelEntry) -> list[str]:
    return [entry.filename] if entry.filename else [timm_format.CONFIG_NAME, timm_format.WEIGHTS_NAME]


def download_model(
    spec: str, *, revision: str | None = None, cache_dir: str | Path | None = None
) -> list[HubFile]:
    """Fetch every file a model needs into the HF cache; `ModelNotFoundError` when offline and not cached."""
    repo_id, files, spec_revision, hint = hub_files_of(spec)
    if spec in MODELS and MODELS[spec].filename_alternatives:  # one file, several possible spellings
        entry = MODELS[spec]
        return [
            fetch_first(
                repo_id,
                entry.filenames,
                revision=revision or spec_revision,
                cache_dir=cache_dir,
                fix_hint=hint,
            )
        ]
    return [
        fetch_file(repo_id, name, revision=revision or spec_revision, cache_dir=cache_dir, fix_hint=hint)
        for name in files
    ]


def entry_cached(entry: ModelEntry, cache_dir: str | Path | None = None) -> bool:
    """True when the entry's weights are available without network (HF cache or an existing local path).

    Encoders without weights (`raw-pixels`) are always available.
    """
    if not entry.has_weights:
        return True
    local = entry.resolve_local_path()
    if local is not None:
        return local.exists()
    if entry.repo_id is None:
        return False
    if entry.filename_alternatives:
        return any(is_cached(entry.repo_id, name, cache_dir=cache_dir) for name in entry.filenames)
    return all(is_cached(entry.repo_id, name, cache_dir=cache_dir) for name in _entry_files(entry))
