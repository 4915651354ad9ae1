"""Shared probe-test data: a store manifest, random linear heads saved as probe folders, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from plstitch_eval.errors import PlstitchError
from plstitch_eval.probes import LinearProbeHead, save_probe
from tests.eval.evaluate.conftest import CLASS_NAMES

DIM = 6
PREPROCESSING = {"input_size": [3, 224, 224], "mean": [0.485, 0.456, 0.406], "crop_pct": 1.0}
MANIFEST = {
    "dataset": "gtea",
    "class_names": CLASS_NAMES,
    "model": {"spec": "hf-hub:org/encoder-a", "feature_dim": DIM, "provenance": {"sha256": "ab" * 32}},
    "preprocessing": PREPROCESSING,
    "fps": 15.0,
    "feature_dim": DIM,
    "created": "2026-01-01T00:00:00+00:00",
    "plstitch_version": "0.1.0",
}


def random_head(dim: int = DIM, classes: int = len(CLASS_NAMES), seed: int = 0) -> LinearProbeHead:
    gen = torch.Generator().manual_seed(seed)
    return LinearProbeHead(
        torch.randn(dim, generator=gen),
        torch.rand(dim, generator=gen) + 0.5,
        torch.randn(dim, classes, generator=gen),
        torch.randn(classes, generator=gen),
    )


def save_random(folder: Path, **kwargs) -> Path:
    return save_probe(
        folder, "linear", random_head(), MANIFEST, CLASS_NAMES, {"lr": 0.1}, {"accuracy": 50.0}, **kwargs
    )


def one_line_error(exc: pytest.ExceptionInfo) -> str:
    message = str(exc.value)
    assert "\n" not in message and isinstance(exc.value, PlstitchError)
    return message
