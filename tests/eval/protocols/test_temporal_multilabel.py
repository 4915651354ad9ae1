"""The temporal protocol of the multi-label tasks (`protocols/temporal_multilabel.py`): `plstitch temporal
--task triplets` on a tiny synthetic-triplets store writes the `temporal-triplets` results, whose figures the
task's own metric (ivtmetrics' maps) gives again from the stored predictions, its epoch the best on validation
mAP_IVT; CVS's soft ratings (NaN on unrated frames) train and score; a store lacking the labels and options
the multi-label model does not take are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.metrics.cvs import cvs_metrics
from plstitch_eval.metrics.triplets import triplet_maps
from plstitch_eval.protocols.temporal_multilabel import run_multilabel_temporal
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.tasks import get_task
from plstitch_eval.temporal.fit import TemporalConfig
from tests.eval.protocols.stores import write_store
from tests.eval.tasks.cli import refused, synthetic_store

TINY = {"n_videos": 9, "size": 32, "min_seconds": 6.0, "max_seconds": 10.0, "workers": 1}
SMALL = ["--stages", "2", "--layers", "3", "--channels", "8", "--epochs", "3", "--lr", "0.01"]
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    return synthetic_store("synthetic-triplets", tmp_path_factory.mktemp("triplets"), **TINY)


def test_temporal_triplets_writes_what_its_predictions_give(store: FeatureStore, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    args = ["temporal", "--features", str(store.root), "--task", "triplets", *SMALL, "--json", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "mAP_IVT" in result.stdout and "2x3x8" in result.stdout
    results = json.loads(out.read_text())
    task = get_task("triplets")
    assert results["task"] == "temporal-triplets" == task.results_task("temporal")
    assert list(results["metrics"])[:6] == list(task.metrics)
    proto = results["protocol"]
    assert proto["chosen_epoch"] == int(np.nanargmax(proto["val_scores"])) + 1 and proto["epochs"] == 3
    videos = sorted(results["predictions"])
    assert videos == sorted(results["splits"]["test"])
    labels = []
    for video in videos:
        rows = store.read(video).triplets
        labels.append(rows[(rows >= 0).all(1)])
    scores = [np.asarray(results["predictions"][v]) for v in videos]
    assert all(s.shape == y.shape for s, y in zip(scores, labels, strict=True))
    maps = triplet_maps(scores, labels)
    for name in task.metrics:
        assert results["metrics"][name] == pytest.approx(maps[f"mAP_{name[4:].lower()}"], abs=1e-9)
    alone = triplet_maps([scores[0]], [labels[0]])
    assert results["per_video"][videos[0]]["mAP_IVT"] == pytest.approx(alone["mAP_ivt"], abs=1e-9)


def cvs_store(root: Path) -> FeatureStore:
    """Three criteria readable from the features; rated on every third frame (NaN elsewhere)."""
    rng = np.random.default_rng(0)
    names = [f"v{i}" for i in range(8)]
    manifest = {
        "dataset": "synthetic-cvs",
        "class_names": ["a"],
        "cvs_names": ["C1", "C2", "C3"],
        "splits": {"train": names[:4], "val": names[4:6], "test": names[6:]},
        "model": {"spec": "toy", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0,
    }
    store = FeatureStore.create(root, manifest)
    for name in names:
        n = int(rng.integers(15, 25))
        mean = rng.integers(0, 4, size=(n, 3)) / 3.0
        rows = np.full((n, 3), np.nan, np.float32)
        rows[::3] = mean[::3]
        feats = np.concatenate([mean * 2 + 0.3 * rng.normal(size=(n, 3)), rng.normal(size=(n, 2))], 1)
        store.write(VideoFeatures(name, feats.astype(np.float32), np.zeros(n, np.int64), np.arange(n) * 1.0,
                                  cvs=rows))  # fmt: skip
    return store


def test_cvs_soft_ratings_train_and_are_scored_by_the_cvs_metric(tmp_path: Path) -> None:
    store = cvs_store(tmp_path / "cvs")
    config = TemporalConfig(stages=2, layers=2, channels=8, epochs=4, lr=0.01, dropout=0.0)
    results = run_multilabel_temporal("cvs", store.root, config)
    assert results["task"] == "temporal-cvs" and results["protocol"]["select_metric"] == "mAP"
    videos = sorted(results["predictions"])
    targets = []
    for video in videos:
        rows = store.read(video).cvs
        targets.append(rows[np.isfinite(rows).all(1)])
    scores = [np.asarray(results["predictions"][v]) for v in videos]
    assert [len(s) for s in scores] == [len(t) for t in targets]
    pooled = cvs_metrics(scores, targets)["per_frame"]
    assert results["metrics"]["mAP"] == pytest.approx(pooled["mAP"], abs=1e-9)
    assert results["metrics"]["brier"] == pytest.approx(pooled["brier"], abs=1e-9)


def test_a_store_without_the_labels_and_options_it_does_not_take_are_refused(
    store: FeatureStore, tmp_path: Path
) -> None:
    plain = write_store(tmp_path / "plain")  # phases and tools, no triplets
    line = refused("temporal", "--features", str(plain.root), "--task", "triplets", *SMALL)
    assert "records no triplet names" in line and "cholect50" in line
    line = refused("temporal", "--features", str(store.root), "--task", "triplets", "--relaxed")
    assert line.startswith("error: --relaxed: not with temporal --task triplets")
    line = refused("temporal", "--features", str(store.root), "--task", "tools", "--seeds", "2")
    assert "--seeds" in line
