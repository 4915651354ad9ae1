"""Reading checkpoint files safely: safetensors, or `torch.load(weights_only=True)` with a small allowlist."""

from __future__ import annotations

import argparse
import hashlib
import pickle
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file as load_safetensors

from plstitch_eval.errors import CheckpointError, UnsafeCheckpointError
from plstitch_eval.utils.console import logger

CHECKPOINT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin", ".ckpt")


def _harmless_globals() -> list[Any]:
    """Plain-data classes DINO/iBOT-style checkpoints pickle next to the weights (args, numpy scalars)."""
    allowed: list[Any] = [argparse.Namespace]
    try:
        import numpy as np

        core = getattr(np, "_core", None) or np.core
        allowed += [np.dtype, core.multiarray.scalar, core.multiarray._reconstruct, np.ndarray]
        # checkpoints written with numpy 1.x name these numpy.core.multiarray.*
        allowed += [
            (core.multiarray.scalar, "numpy.core.multiarray.scalar"),
            (core.multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
        ]
        allowed += [type(np.dtype(name)) for name in ("float64", "float32", "int64", "int32", "bool")]
    except Exception:  # numpy layout differs between versions; the allowlist is best effort
        pass
    return allowed


def load_checkpoint(path: str | Path, *, trust_pickle: bool = False) -> Any:
    """Load a `.safetensors` file or a pickle checkpoint without executing code from it.

    Pickles go through `torch.load(weights_only=True)`; one that needs code execution raises
    `UnsafeCheckpointError` unless `trust_pickle=True` (only for files from a source you trust).
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"Checkpoint file {path} does not exist.")
    if path.suffix == ".safetensors":
        try:
            return load_safetensors(str(path), device="cpu")
        except Exception as exc:
            raise CheckpointError(f"Cannot read safetensors file {path}: {exc}") from exc
    if trust_pickle:
        logger.warning("Loading %s with trust_pickle=True: it may run arbitrary code.", path)
        return torch.load(path, map_location="cpu", weights_only=False)
    try:
        with torch.serialization.safe_globals(_harmless_globals()):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UnsafeCheckpointError(
            f"Refused to load {path}: it is a pickle that needs code execution ({first_line}). "
            "Convert it to safetensors, or pass --trust-pickle (trust_pickle=True) "
            "only if you trust its source."
        ) from exc
    except (RuntimeError, EOFError, OSError) as exc:
        raise CheckpointError(f"Cannot read checkpoint {path}: {exc}") from exc


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks (provenance of the exact weights used)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()
