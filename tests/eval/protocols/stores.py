"""One small store for the registry-wide protocol tests (selection blind to test labels, settings that
arrive): phase runs and tool presence both readable from the features, clean training frames and noisy
held-out ones, official train/val/test splits; copies with one split's labels permuted;
a small cell config."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.temporal.fit import TemporalConfig

CLASSES = ["a", "b", "c", "d"]
TOOLS = ["grasper", "hook", "clipper"]
SPLITS = {"train": 6, "val": 3, "test": 3}
NOISE = {"train": 0.4, "val": 1.2, "test": 1.2}  # clean training frames, noisy held-out ones


def write_store(root: Path, seed: int = 0) -> FeatureStore:
    """Phase runs and tool presence both readable from the features; official train/val/test splits."""
    rng = np.random.default_rng(seed)
    dim = 12
    centres = rng.normal(size=(len(CLASSES), dim)) * 1.2
    tool_dirs = rng.normal(size=(len(TOOLS), dim)) * 1.2
    splits: dict[str, list[str]] = {}
    items = []
    for split, count in SPLITS.items():
        names = [f"{split}{i}" for i in range(count)]
        splits[split] = names
        for name in names:
            runs = rng.permutation(len(CLASSES))
            labels = np.repeat(runs, rng.integers(6, 11, size=len(runs))).astype(np.int64)
            n = len(labels)
            tools = (rng.random((n, len(TOOLS))) < [0.5, 0.35, 0.25]).astype(np.int8)
            tools[0] = 1  # every tool present in every video
            feats = centres[labels] + tools @ tool_dirs + NOISE[split] * rng.normal(size=(n, dim))
            frame_times = np.arange(n, dtype=np.float64)
            items.append(VideoFeatures(name, feats.astype(np.float32), labels, frame_times, tools))
    manifest = {
        "dataset": "selection-test",
        "class_names": CLASSES,
        "tool_names": TOOLS,
        "splits": splits,
        "background_classes": [],
        "model": {"spec": "tiny-test-encoder", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0,
    }
    store = FeatureStore.create(root, manifest)
    for item in items:
        store.write(item)
    return store


def permuted_copy(store: FeatureStore, root: Path, split: str | list[str]) -> FeatureStore:
    """A copy of `store` whose `split` videos (a split's name or the videos) have their phase labels shifted
    by one class and their tool columns rotated: the same features, frame counts and class / tool
    frequencies, other labels."""
    shutil.copytree(store.root, root)
    copy = FeatureStore(root)
    videos = store.manifest["splits"][split] if isinstance(split, str) else split
    for video in videos:
        item = copy.read(video)
        labels = np.where(item.labels >= 0, (item.labels + 1) % len(CLASSES), item.labels)
        tools = None if item.tools is None else np.roll(item.tools, 1, axis=1)
        copy.write(VideoFeatures(video, item.features, labels, item.frame_times, tools))
    return copy


@dataclass
class CellConfig:
    """What a benchmark cell hands `Protocol.run`: the sections and fields of a `BenchmarkConfig`, small."""

    knn: KnnConfig = field(default_factory=KnnConfig)
    linear: LinearConfig = field(
        default_factory=lambda: LinearConfig(
            lrs=(0.01, 0.1, 1.0), weight_decays=(0.0, 0.1), epochs=6, batch_size=64
        )
    )
    temporal: TemporalConfig = field(
        default_factory=lambda: TemporalConfig(stages=2, layers=4, channels=16, epochs=8)
    )
    val_fraction: float = 0.2
    cv_folds: int = 3
    cv_protocol: str = "linear"
    cv_seed: int = 0
    protocol_configs: dict[str, Any] = field(default_factory=dict)
