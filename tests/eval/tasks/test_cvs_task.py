"""The `cvs` task end to end: a small synthetic-cvs set extracted with the raw-pixels encoder keeps the
raters' mean on the rated frames (NaN elsewhere); `plstitch linear --task cvs` gives CVSMetric's figures,
chosen on validation mAP, and `cvs_metrics` on the results' `predictions` with the store's ratings gives them
again; a store without ratings, and a damaged rating, are refused in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import cvs_at, get_dataset
from plstitch_eval.metrics.cvs import cvs_metrics
from plstitch_eval.protocols.multilabel import annotated_rows
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import MULTI_LABEL, get_task
from tests.eval.protocols.stores import write_store
from tests.eval.tasks.cli import refused, synthetic_store

TINY = {"n_videos": 9, "size": 32, "min_seconds": 12.0, "max_seconds": 20.0, "workers": 1}
QUICK = ["--epochs", "5", "--lr", "0.01", "--lr", "0.1", "--wd", "0", "--device", "cpu"]
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    return synthetic_store("synthetic-cvs", tmp_path_factory.mktemp("cvs"), **TINY)


def test_the_task_is_registered_soft_and_listed() -> None:
    task = get_task("cvs")
    assert task.head == MULTI_LABEL and task.select_metric == "mAP" and task.multilabel.soft
    result = runner.invoke(app, ["tasks"])
    assert result.exit_code == 0 and "cvs" in result.stdout


def test_the_store_keeps_the_raters_mean_on_rated_frames(store: FeatureStore) -> None:
    assert store.manifest["cvs_names"] == ["C1", "C2", "C3"]
    adapter = get_dataset("synthetic-cvs", root=Path(store.manifest["dataset_root"]), **TINY)
    for record in adapter.videos():
        item = store.read(record.name)
        assert item.cvs.dtype == np.float32 and item.cvs.shape == (len(item.features), 3)
        want = cvs_at(record, item.frame_times)
        np.testing.assert_allclose(item.cvs, want.astype(np.float32), equal_nan=True)
        rated = ~np.isnan(item.cvs).any(axis=1)
        assert 0 < rated.sum() < len(rated)  # rated up to the gallbladder dissection only


def test_linear_cvs_reports_what_its_predictions_give(store: FeatureStore, tmp_path: Path) -> None:
    out = tmp_path / "cvs.json"
    result = runner.invoke(app, ["linear", "--features", str(store.root), "--task", "cvs", *QUICK,
                                 "--json", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["task"] == "linear-cvs"
    test = results["splits"]["test"]
    rows = {v.video: v.targets for v in annotated_rows(store.read_many(test), lambda it: it.cvs, soft=True)}
    probs = [np.asarray(results["predictions"][v]) for v in test]
    again = cvs_metrics(probs, [rows[v] for v in test], test)
    for key in ("mAP", "brier", "f1", "balanced_accuracy"):
        got, want = results["metrics"][key], again["per_frame"][key]
        assert (got is None and want is None) or math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(results["metrics"]["video_brier"], again["per_video"]["brier"], rel_tol=1e-9)
    assert 0.0 <= results["metrics"]["brier"] <= 1.0
    vals = results["protocol"]["val_scores"]
    assert results["protocol"]["chosen_lr"] in (0.01, 0.1) and len(vals) == 2
    assert all(abs(p - 0.5) > 0 for row in probs for p in np.ravel(row))  # probabilities, not targets


def test_a_store_without_ratings_is_refused(tmp_path: Path) -> None:
    plain = write_store(tmp_path / "plain")
    line = refused("linear", "--features", str(plain.root), "--task", "cvs")
    assert "no cvs names" in line and "synthetic-cvs" in line


def test_a_rating_outside_0_1_is_refused(store: FeatureStore, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "damaged"
    shutil.copytree(store.root, copy)
    damaged = FeatureStore(copy)
    video = damaged.manifest["splits"]["train"][0]
    item = damaged.read(video)
    rated = int(np.flatnonzero(~np.isnan(item.cvs).any(axis=1))[0])
    item.cvs[rated, 1] = 2.0
    damaged.write(item)
    line = refused("linear", "--features", str(copy), "--task", "cvs", *QUICK)
    assert f"video {video!r}" in line and "cvs value 2" in line and "[0, 1]" in line
