"""`random-init:SPEC`: a timm-format model's architecture with fresh weights (the no-pretraining reference).

SPEC is any timm-format source `load_encoder` takes: a registry entry with converter "timm",
`hf-hub:ORG/NAME`, a timm folder or a finished training run. Only its `config.json` is read
(`timm_format.random_init_timm_dir`); the preprocessing is the source's. The spec form uses seed 0
(`DEFAULT_SEED`); `build_random_init` takes any seed.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch
from torch import nn

from plstitch_eval.errors import ConfigError, ModelNotFoundError
from plstitch_eval.hub import timm_format
from plstitch_eval.hub.hub_files import HubFile, fetch_file
from plstitch_eval.hub.registry import ModelEntry
from plstitch_eval.hub.run_folder import backbone_dir, is_finished
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.hub.spec import (
    HF_HUB_FORM,
    RANDOM_INIT_PREFIX,
    parse_random_init_source,
    parse_spec,
    random_init_source,
    random_init_spec,
)
from plstitch_eval.preprocess import DataConfig

DEFAULT_SEED = 0
TIMM_SOURCES = f"a registry model with converter timm, {HF_HUB_FORM}, a timm-format folder or a training run"


def is_timm_format_spec(spec: str | Path) -> bool:
    """True when `spec` names a timm-format model (so `random-init:SPEC` works); checks without network."""
    try:
        parsed = parse_spec(spec)
    except ConfigError:
        return False
    if parsed.kind == "registry":
        return parsed.entry.converter == "timm"
    if parsed.kind == "hf-hub":
        return parsed.filename is None
    return parsed.kind == "path" and _local_config_dir(parsed.path) is not None


def build_random_init(
    source: str,
    *,
    seed: int = DEFAULT_SEED,
    revision: str | None = None,
    cache_dir: str | Path | None = None,
) -> tuple[nn.Module, DataConfig, dict[str, Any]]:
    """(model with fresh weights, the source's DataConfig, provenance) for a timm-format `source` spec.

    Provenance records `random_init: True`, `seed`, the source and its config.json; its `sha256` is a digest
    of the initialised tensors (there is no weights file), so stores of different seeds never mix.
    """
    folder, entry, hub_file = _config_dir(source, revision, cache_dir)
    model, data_config = timm_format.random_init_timm_dir(folder, seed, **(entry.model_args if entry else {}))
    if entry is not None and entry.data_config is not None:
        data_config = entry.data_config
    config = folder / timm_format.CONFIG_NAME
    provenance = {
        "spec": random_init_spec(source),
        "source": source,
        "random_init": True,
        "seed": int(seed),
        "repo_id": hub_file.repo_id if hub_file else None,
        "filename": timm_format.CONFIG_NAME,
        "revision": hub_file.revision if hub_file else None,
        "commit": hub_file.commit if hub_file else None,
        "config_sha256": sha256_file(config),
        "sha256": state_digest(model),
        "path": str(config.resolve()),
    }
    return model, data_config, provenance


def state_digest(model: nn.Module) -> str:
    """sha256 over a model's state dict (names and raw tensor bytes, in name order)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _config_dir(
    source: str, revision: str | None, cache_dir: str | Path | None
) -> tuple[Path, ModelEntry | None, HubFile | None]:
    """(folder holding the source's config.json, its registry entry, the Hub file) for a timm-format spec."""
    parsed = parse_random_init_source(source)
    if parsed.kind == "registry":
        return _entry_config_dir(parsed.entry, revision, cache_dir)
    if parsed.kind == "hf-hub":
        if parsed.filename is not None:
            raise ConfigError(f"random-init needs {TIMM_SOURCES}; {source!r} is a raw checkpoint file.")
        hub_file = fetch_file(
            parsed.repo_id,
            timm_format.CONFIG_NAME,
            revision=revision or parsed.revision,
            cache_dir=cache_dir,
            fix_hint=f"`plstitch download {source}`",
        )
        return hub_file.path.parent, None, hub_file
    if not parsed.path.exists():
        raise ModelNotFoundError(
            f"random-init: {source!r} is neither a registry model, an {HF_HUB_FORM} spec, nor an "
            "existing path."
        )
    folder = _local_config_dir(parsed.path)
    if folder is None:
        raise ConfigError(f"random-init needs {TIMM_SOURCES}; {source!r} is not one.")
    return folder, None, None


def _entry_config_dir(
    entry: ModelEntry, revision: str | None, cache_dir: str | Path | None
) -> tuple[Path, ModelEntry, HubFile | None]:
    if entry.converter != "timm":
        raise ConfigError(
            f"random-init needs {TIMM_SOURCES}; {entry.name!r} has converter {entry.converter!r}."
        )
    local = entry.resolve_local_path()
    if local is not None:
        folder = _local_config_dir(local)
        if folder is None:
            raise ModelNotFoundError(
                f"Model {entry.name!r} points at {local}, which has no timm config.json."
            )
        return folder, entry, None
    if entry.repo_id is None:
        raise ModelNotFoundError(f"Model {entry.name!r} has no timm-format source to read config.json from.")
    hub_file = fetch_file(
        entry.repo_id,
        timm_format.CONFIG_NAME,
        revision=revision,
        cache_dir=cache_dir,
        fix_hint=f"`plstitch download {entry.name}`",
    )
    return hub_file.path.parent, entry, hub_file


def _local_config_dir(path: Path) -> Path | None:
    """A finished run's `backbone/`, or `path` itself when it holds a timm config.json; else None."""
    if not path.is_dir():
        return None
    if is_finished(path):
        return backbone_dir(path)
    return path if timm_format.has_timm_config(path) else None


__all__ = [
    "DEFAULT_SEED",
    "RANDOM_INIT_PREFIX",
    "build_random_init",
    "is_timm_format_spec",
    "random_init_source",
    "random_init_spec",
    "state_digest",
]
