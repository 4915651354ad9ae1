"""The multi-label linear probe on the `triplets` task: its choice and predictions never see the test
labels (shuffled test triplets move the test maps only), validation labels move the validation figures, and
a damaged triplet row is refused in one line naming the file and the command that mends it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_NAMES
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols.multilabel import run_multilabel_linear
from plstitch_eval.store.features import FeatureStore, VideoFeatures

SPLITS = {"train": 5, "val": 2, "test": 2}
SHOWN = [17, 60, 77, 1, 94, 13]  # the triplets the videos show
CONFIG = LinearConfig(
    lrs=(0.01, 0.1, 1.0), weight_decays=(0.0,), epochs=4, balance_classes=True, device="cpu"
)


def write_triplet_store(root: Path, shuffle: str | None = None) -> FeatureStore:
    """Features that carry the triplets (+ noise); `shuffle` a split: its triplet rows permuted across its
    frames (same features, other labels)."""
    rng = np.random.default_rng(0)
    directions = rng.normal(size=(100, 16))
    items, splits = [], {}
    for split, count in SPLITS.items():
        splits[split] = [f"{split}{i}" for i in range(count)]
        for name in splits[split]:
            n = 30
            rows = np.zeros((n, 100), np.int8)
            rows[:, SHOWN] = rng.random((n, len(SHOWN))) < 0.4
            feats = rows @ directions + 1.5 * rng.normal(size=(n, 16))
            if split == shuffle:
                rows = rows[np.random.default_rng(1).permutation(n)]
            rows[-2:] = -1  # past the last annotated second
            labels, times = np.zeros(n, np.int64), np.arange(n, dtype=np.float64)
            items.append(VideoFeatures(name, feats.astype(np.float32), labels, times, triplets=rows))
    manifest = {
        "dataset": "cholect50",
        "class_names": ["a"],
        "triplet_names": list(TRIPLET_NAMES),
        "splits": splits,
        "model": {"spec": "tiny-test-encoder", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0,
    }
    store = FeatureStore.create(root, manifest)
    for item in items:
        store.write(item)
    return store


def test_the_choice_and_predictions_never_see_the_test_labels(tmp_path: Path) -> None:
    base = run_multilabel_linear("triplets", write_triplet_store(tmp_path / "a").root, CONFIG)
    moved = run_multilabel_linear("triplets", write_triplet_store(tmp_path / "b", "test").root, CONFIG)
    for key in ("chosen_lr", "chosen_weight_decay", "val_scores"):
        assert moved["protocol"][key] == base["protocol"][key]
    assert moved["predictions"] == base["predictions"]
    assert moved["metrics"]["mAP_IVT"] < base["metrics"]["mAP_IVT"] - 10  # the labels did move the maps
    assert base["metrics"]["mAP_IVT"] > 70  # the features carry the triplets
    val = run_multilabel_linear("triplets", write_triplet_store(tmp_path / "c", "val").root, CONFIG)
    assert val["protocol"]["val_scores"] != base["protocol"]["val_scores"]


def test_a_damaged_triplet_row_is_refused_in_one_line(tmp_path: Path) -> None:
    store = write_triplet_store(tmp_path / "s")
    item = store.read("test0")
    item.triplets[3, 5] = -1  # one -1 in an annotated row: the frame would be dropped unseen
    store.write(item)
    with pytest.raises(FeatureStoreError) as info:
        run_multilabel_linear("triplets", store.root, CONFIG)
    message = str(info.value)
    assert (
        "\n" not in message
        and f"{store.path('test0')} (video 'test0') has triplet label -1 at frame 3" in message
    )
    assert "plstitch extract" in message
