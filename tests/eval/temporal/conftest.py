"""Feature stores of ordered procedures for the temporal tests, built with the real FeatureStore."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES
from plstitch_eval.store.features import FeatureStore, VideoFeatures

PHASES = list(CHOLEC80_PHASES)


def make_procedure_store(
    root: Path,
    n_videos: int = 16,
    dim: int = 16,
    noise: float = 2.0,
    seed: int = 0,
    min_frames: int = 40,
    max_frames: int = 70,
    with_val: bool = False,
    dataset: str = "synthetic",
) -> FeatureStore:
    """Videos running through the phases in order (random durations); features = phase centre + heavy noise.

    The noise makes single frames ambiguous (a per-frame probe fragments the phases) while the order and the
    durations are easy to learn from context, as in surgical phase recognition.
    """
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(PHASES), dim))
    names = [f"video{i:02d}" for i in range(n_videos)]
    n_test = max(2, n_videos // 4)
    splits = {"train": names[:-n_test], "val": [], "test": names[-n_test:]}
    if with_val:
        splits["train"], splits["val"] = splits["train"][:-2], splits["train"][-2:]
    manifest = {
        "dataset": dataset,
        "class_names": PHASES,
        "splits": splits,
        "background_classes": [],
        "model": {"spec": "tiny-test-encoder", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0,
        "feature_dim": dim,
    }
    store = FeatureStore.create(root, manifest)
    for name in names:
        frames = int(rng.integers(min_frames, max_frames + 1))
        shares = rng.dirichlet(np.full(len(PHASES), 8.0))
        bounds = np.round(np.cumsum(shares) * frames).astype(int)
        labels = np.searchsorted(bounds, np.arange(frames), side="right").clip(0, len(PHASES) - 1)
        feats = centres[labels] + noise * rng.normal(size=(frames, dim))
        store.write(
            VideoFeatures(
                name, feats.astype(np.float32), labels.astype(np.int64), np.arange(frames, dtype=float)
            )
        )
    return store


@pytest.fixture
def procedure_store(tmp_path: Path) -> FeatureStore:
    return make_procedure_store(tmp_path / "store")
