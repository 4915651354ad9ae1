"""Global RNG state (torch, numpy, python, CUDA) as plain tensors and numbers, and seeding.

Why plain values: a checkpoint holding them loads with ``torch.load(weights_only=True)`` and resumes exactly.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def capture_rng(device: torch.device) -> dict[str, Any]:
    """torch, numpy, python (and CUDA) global RNG states as tensors, ints and floats."""
    _, keys, pos, has_gauss, cached = np.random.get_state()
    version, py_state, gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "python": {
            "version": int(version),
            "state": torch.tensor(py_state, dtype=torch.int64),
            "gauss": gauss,
        },
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any], device: torch.device) -> None:
    """Inverse of `capture_rng`."""
    torch.set_rng_state(state["torch"])
    np_state = state["numpy"]
    np.random.set_state(
        (
            "MT19937",
            np_state["keys"].numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gaussian"],
        )
    )
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss"]))
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def seed_everything(seed: int) -> None:
    """Seed torch, numpy and python's global RNGs from one integer (numpy takes it modulo 2**32)."""
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
