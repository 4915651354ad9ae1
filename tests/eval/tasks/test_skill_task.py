"""The `skill` task end to end: a small synthetic-skill set extracted with the raw-pixels encoder keeps each
video's scores in its manifest; `plstitch linear --task skill` gives Spearman's rho and the MAE that
`skill_scores` gives again from the results' `predictions`, beside the training-mean (rho undefined) and
duration references; a part is regressed with --skill-score; a store without scores, and options the task
does not take, are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.extract.store import skill_record
from plstitch_eval.metrics.remaining import video_end_s
from plstitch_eval.metrics.skill import duration_prediction, skill_scores
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import get_task
from plstitch_eval.tasks.registry import VIDEO_REGRESSION
from tests.eval.data.stand_ins import JIGSAWS, write_jigsaws
from tests.eval.protocols.stores import write_store
from tests.eval.tasks.cli import refused, synthetic_store

TINY = {"n_videos": 9, "size": 32, "min_seconds": 6.0, "max_seconds": 14.0, "workers": 1}
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    return synthetic_store("synthetic-skill", tmp_path_factory.mktemp("skill"), **TINY)


def run(*args: str) -> dict:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    assert "spearman_rho" in result.stdout and "training-mean" in result.stdout
    return json.loads(Path(args[args.index("--json") + 1]).read_text())


def test_the_task_is_registered_and_listed() -> None:
    task = get_task("skill")
    assert task.head == VIDEO_REGRESSION and list(task.metrics) == ["spearman_rho", "MAE"]
    assert task.results_task("linear") == "linear-skill"
    result = runner.invoke(app, ["tasks", "--json", "-"])
    assert result.exit_code == 0, result.output
    row = {r["name"]: r for r in json.loads(result.stdout)["tasks"]}["skill"]
    assert row["head"] == VIDEO_REGRESSION and row["package"] == "plstitch"


def test_the_store_keeps_every_videos_scores(store: FeatureStore) -> None:
    manifest = store.manifest
    adapter = get_dataset("synthetic-skill", root=Path(manifest["dataset_root"]), **TINY)
    assert manifest["skill_names"][0] == "grs" and len(manifest["skill_names"]) == 7
    assert manifest["skill"] == {r.name: r.skill for r in adapter.videos()}
    assert all(s["grs"] == sum(v for k, v in s.items() if k != "grs") for s in manifest["skill"].values())
    assert "skill" not in write_store(store.root.parent / "plain").manifest  # other stores: unchanged


def test_jigsaws_scores_reach_the_manifest_record(tmp_path: Path) -> None:
    adapter = get_dataset("jigsaws", root=write_jigsaws(tmp_path / "JIGSAWS"), task="all")
    record = skill_record(adapter)
    assert record["skill_names"] == list(adapter.skill_names)
    trials = {t: sum(items) for trials in JIGSAWS.values() for t, (_, items, _) in trials.items()}
    assert {t: s["grs"] for t, s in record["skill"].items()} == trials
    for record in adapter.videos():  # a dataset without skill ratings: the manifest it always had
        record.skill = None
    assert skill_record(adapter) == {}


def test_linear_skill_gives_the_metrics_its_predictions_give_again(
    store: FeatureStore, tmp_path: Path
) -> None:
    out = tmp_path / "s.json"
    results = run("linear", "--features", str(store.root), "--task", "skill", "--json", str(out))
    assert results["task"] == "linear-skill" and results["headline_metrics"] == ["spearman_rho", "MAE"]
    test, train = results["splits"]["test"], results["splits"]["train"]
    assert set(results["predictions"]) == set(test) and len(test) == 3
    truth = {v: s["grs"] for v, s in store.manifest["skill"].items()}
    again = skill_scores(results["predictions"], truth)
    assert results["metrics"]["MAE"] == pytest.approx(again["mae"], abs=1e-12)
    assert results["metrics"]["spearman_rho"] == again["spearman_rho"]
    for video, row in results["per_video"].items():
        assert row["score"] == truth[video] and row["abs_error"] == pytest.approx(
            abs(row["predicted"] - truth[video])
        )
    protocol = results["protocol"]
    assert protocol["chosen_alpha"] in protocol["alphas"] and protocol["score"] == "grs"
    mean_row = results["references"]["training-mean"]
    assert mean_row["metrics"]["spearman_rho"] is None and "undefined" in mean_row["note"]
    mean = np.mean([truth[v] for v in train])
    assert list(mean_row["predictions"].values()) == pytest.approx([mean] * len(test))
    durations = {v: video_end_s(store.read(v).frame_times) for v in train + test}
    timed = duration_prediction(
        [durations[v] for v in train], [truth[v] for v in train], {v: durations[v] for v in test}
    )
    assert results["references"]["duration"]["predictions"] == pytest.approx(timed)
    assert results["references"]["duration"]["metrics"]["MAE"] == pytest.approx(
        skill_scores(timed, truth)["mae"]
    )


def test_a_part_is_regressed_with_skill_score(store: FeatureStore, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    args = ["linear", "--features", str(store.root), "--task", "skill", "--json", str(out)]
    results = run(*args, "--skill-score", "respect_for_tissue")
    truth = {v: s["respect_for_tissue"] for v, s in store.manifest["skill"].items()}
    assert results["class_names"] == ["respect_for_tissue"]
    assert results["metrics"]["MAE"] == pytest.approx(skill_scores(results["predictions"], truth)["mae"])
    line = refused(*args, "--skill-score", "speed")
    assert "--skill-score 'speed' is not in" in line and "respect_for_tissue" in line


def test_cv_k_folds_hold_each_video_out_once_and_refuse_loso(store: FeatureStore, tmp_path: Path) -> None:
    out = tmp_path / "cv.json"
    results = run("cv", "--features", str(store.root), "--task", "skill", "--folds", "3", "--json", str(out))
    held = [v for fold in results["splits"]["folds"] for v in fold]
    assert sorted(held) == sorted(store.videos()) and len(results["folds"]) == 3
    truth = {v: s["grs"] for v, s in store.manifest["skill"].items()}
    pooled = skill_scores(results["predictions"], truth)
    assert results["metrics"]["MAE_pooled"] == pytest.approx(pooled["mae"])
    line = refused("cv", "--features", str(store.root), "--task", "skill", "--folds", "louo")
    assert "--folds louo:" in line and "not JIGSAWS trials" in line and "--folds 5" in line


def test_a_store_without_scores_and_options_it_does_not_take_are_refused(
    store: FeatureStore, tmp_path: Path
) -> None:
    plain = write_store(tmp_path / "plain")
    line = refused("linear", "--features", str(plain.root), "--task", "skill")
    assert f"{plain.root}/manifest.json records no skill scores" in line
    assert "--dataset jigsaws (or synthetic-skill)" in line
    line = refused("linear", "--features", str(store.root), "--task", "skill", "--save", str(tmp_path / "p"))
    assert line.startswith("error: --save: not with --task skill")
    line = refused("linear", "--features", str(plain.root), "--task", "phases", "--skill-score", "grs")
    assert "--skill-score: only with --task skill" in line
    line = refused("cv", "--features", str(plain.root), "--folds", "loso")
    assert "--folds must be a number of folds" in line
