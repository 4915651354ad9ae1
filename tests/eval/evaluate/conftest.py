"""Tiny feature stores for the evaluation tests, built with the real FeatureStore."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.store.features import FeatureStore, VideoFeatures

CLASS_NAMES = ["background", "cut", "stir", "pour"]


def make_store(
    root: Path,
    dataset: str = "gtea",
    n_videos: int = 8,
    dim: int = 16,
    with_val: bool = True,
    seed: int = 0,
    noise: float = 0.3,
) -> FeatureStore:
    """Videos of 3-6 label runs each; features = class centre + noise, so k-NN/linear can separate them."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(CLASS_NAMES), dim)) * 2
    names = [f"vid{i:02d}" for i in range(n_videos)]
    if with_val:
        splits = {"train": names[: n_videos // 2], "val": names[n_videos // 2 : -2], "test": names[-2:]}
    else:
        splits = {"train": names[:-2], "test": names[-2:]}
    manifest = {
        "dataset": dataset,
        "class_names": CLASS_NAMES,
        "splits": splits,
        "background_classes": ["background"],
        "model": {"spec": "tiny-test-encoder", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0,
    }
    store = FeatureStore.create(root, manifest)
    for name in names:
        runs = rng.integers(0, len(CLASS_NAMES), size=rng.integers(3, 7))
        runs[: len(CLASS_NAMES)] = np.arange(len(CLASS_NAMES))[: len(runs)]
        labels = np.repeat(runs, rng.integers(4, 10, size=len(runs))).astype(np.int64)
        feats = (centres[labels] + noise * rng.normal(size=(len(labels), dim))).astype(np.float32)
        store.write(VideoFeatures(name, feats, labels, np.arange(len(labels), dtype=np.float64)))
    return store


@pytest.fixture
def tiny_store(tmp_path: Path) -> FeatureStore:
    return make_store(tmp_path / "store")


def relabel(store: FeatureStore, video: str, labels: np.ndarray) -> None:
    """Rewrite one video of `store` with new labels (same features and frame times)."""
    item = store.read(video)
    store.write(VideoFeatures(video, item.features, np.asarray(labels, np.int64), item.frame_times))


@pytest.fixture
def plstitch_warnings(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch):
    """Warnings of the `plstitch` logger as a list of messages (a CLI run earlier turns propagation off)."""
    from plstitch_eval.utils.console import logger

    monkeypatch.setattr(logger, "propagate", True)
    caplog.set_level(logging.WARNING, logger="plstitch")

    def messages() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]

    return messages
