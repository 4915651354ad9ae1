"""k-fold CV by video of regression tasks (`plstitch cv --task anticipation|rsd`): folds that test every video
once, fold metrics recomputed from the predictions by hand, the mean and std over folds, per-fold references,
the heads that choose holding validation videos out, and the CLI: one-line refusals, `--task phases` as ever.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols.regression_cv import run_regression_cv
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import TaskSettings
from tests.eval.protocols.stores import write_store

runner = CliRunner()
LINEAR = LinearConfig(lrs=(0.01, 0.1), weight_decays=(0.0,), epochs=3, batch_size=64)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    return write_store(tmp_path_factory.mktemp("regression-cv") / "store")


def remaining_minutes(times: np.ndarray) -> np.ndarray:
    """Minutes to the end (last frame + median step), written out frame by frame."""
    steps = sorted(float(b - a) for a, b in zip(times[:-1], times[1:], strict=True))
    middle = len(steps) // 2
    median = steps[middle] if len(steps) % 2 else (steps[middle - 1] + steps[middle]) / 2
    end = float(times[-1]) + median
    return np.array([(end - float(t)) / 60.0 for t in times])


def test_rsd_folds_test_every_video_once_and_their_metrics_are_recomputed(store: FeatureStore) -> None:
    results = run_regression_cv(store.root, "rsd", TaskSettings(), "knn", KnnConfig(k=5), folds=3, seed=1)
    videos = sorted(v for split in store.manifest["splits"].values() for v in split)
    tested = [v for fold in results["folds"] for v in fold["test"]]
    assert sorted(tested) == videos and len(tested) == len(set(tested))
    assert sorted(results["predictions"]) == videos
    assert results["task"] == "cv-knn-rsd" and results["protocol"]["folds"] == 3
    fold_maes = []
    for fold in results["folds"]:
        errors = []
        for video in fold["test"]:
            truth = remaining_minutes(store.read(video).frame_times)
            errors += [abs(p - t) for p, t in zip(results["predictions"][video], truth, strict=True)]
        fold_maes.append(sum(errors) / len(errors))
        assert fold["metrics"]["MAE"] == pytest.approx(fold_maes[-1], abs=1e-4)  # predictions: 4 decimals
    assert results["metrics"]["MAE"] == pytest.approx(np.mean(fold_maes), abs=1e-4)
    assert results["metrics_std"]["MAE"] == pytest.approx(np.std(fold_maes), abs=1e-4)


def test_each_fold_builds_its_references_from_its_own_training_videos(store: FeatureStore) -> None:
    results = run_regression_cv(store.root, "rsd", TaskSettings(), "knn", KnnConfig(k=5), folds=3)
    videos = sorted(v for split in store.manifest["splits"].values() for v in split)
    naive = []
    for fold in results["folds"]:
        train = [v for v in videos if v not in fold["test"]]  # k-NN holds none out
        durations = [remaining_minutes(store.read(v).frame_times)[0] + 0.0 for v in train]
        mean_duration = float(np.mean(durations))  # every video starts at 0 s: the first frame's remaining
        errors = []
        for video in fold["test"]:
            times = store.read(video).frame_times
            truth = remaining_minutes(times)
            errors += [abs(max(mean_duration - t / 60.0, 0.0) - r) for t, r in zip(times, truth, strict=True)]
        naive.append(sum(errors) / len(errors))
    ref = results["references"]["naive"]
    assert ref["metrics"]["MAE"] == pytest.approx(np.mean(naive), abs=1e-9)
    assert ref["metrics_std"]["MAE"] == pytest.approx(np.std(naive), abs=1e-9)


def test_the_linear_head_holds_validation_videos_out_of_each_fold_and_records_its_choice(
    store: FeatureStore,
) -> None:
    results = run_regression_cv(
        store.root, "anticipation", TaskSettings(horizon_min=0.25), "linear", LINEAR, folds=3
    )
    assert results["task"] == "cv-linear-anticipation"
    for fold in results["folds"]:
        assert fold["chosen_lr"] in (0.01, 0.1)
        scores = fold["val_scores"]
        assert fold["chosen_lr"] == float(min(scores, key=scores.get).split(",")[0].removeprefix("lr="))
    values = [f["metrics"]["phase_wMAE"] for f in results["folds"]]
    assert results["metrics"]["phase_wMAE"] == pytest.approx(np.mean(values), abs=1e-12)
    for video, rows in results["predictions"].items():
        assert np.asarray(rows).shape == (len(store.read(video).labels), len(results["class_names"]))
        assert np.min(rows) >= 0.0 and np.max(rows) <= 0.25


def _invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def test_cv_task_on_the_cli_writes_results_and_refuses_in_one_line(
    store: FeatureStore, tmp_path: Path
) -> None:
    out = tmp_path / "cv.json"
    done = _invoke("cv", "--features", store.root, "--task", "rsd", "--folds", "3", "--json", out, "-q")
    assert done.exit_code == 0, done.output
    results = json.loads(out.read_text())
    assert results["task"] == "cv-knn-rsd" and set(results["references"]) == {"naive", "elapsed-mean"}
    for args, needle in (
        (("--task", "rsd", "--relaxed"), "--relaxed: not with --task rsd"),
        (("--task", "rsd", "--protocol", "majority"), "majority"),
        (("--task", "anticipation", "--horizon", "0"), "--horizon must be above 0"),
        (("--horizon", "2"), "--horizon: only with a regression task"),
    ):
        refused = _invoke("cv", "--features", store.root, "--folds", "3", *args)
        lines = [line for line in refused.stderr.splitlines() if line.strip()]
        assert refused.exit_code == 1 and len(lines) == 1 and needle in lines[0], refused.output


def test_cv_task_phases_writes_what_cv_wrote_before(store: FeatureStore, tmp_path: Path) -> None:
    plain, tasked = tmp_path / "plain.json", tmp_path / "phases.json"
    for path, extra in ((plain, ()), (tasked, ("--task", "phases"))):
        done = _invoke("cv", "--features", store.root, "--folds", "3", "--json", path, "-q", *extra)
        assert done.exit_code == 0, done.output
    a, b = (json.loads(p.read_text()) for p in (plain, tasked))
    a.pop("created"), b.pop("created")
    assert a == b
