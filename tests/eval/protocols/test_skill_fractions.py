"""Label fractions of the skill task (`linear|cv --task skill --train-fraction F`): each seed's subset of the
training videos is the nested rule's (a prefix of the larger fraction's), each subset's predictions are the
ridge fitted on exactly those videos, and the reported figures are the mean over the seeds."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.protocols.fractions import TrainFraction, draw_subset
from plstitch_eval.protocols.skill import SkillData, ridge_predictions, run_skill_cv, run_skill_linear
from tests.eval.protocols.test_skill import store  # noqa: F401 - the JIGSAWS-named store fixture
from tests.eval.tasks.cli import refused

runner = CliRunner()


def test_each_subset_is_the_ridge_on_its_drawn_videos_and_the_mean_is_over_seeds(store) -> None:  # noqa: F811
    splits = store.manifest["splits"]
    train, test = splits["train"] + splits["val"], splits["test"]
    results = run_skill_linear(store.root, train_fraction=TrainFraction(0.5, (0, 1, 2)))
    block = results["train_fraction"]
    assert block["fraction"] == 0.5 and block["seeds"] == [0, 1, 2]
    data = SkillData.of(store, train + test)
    maes = []
    for seed, subset in zip((0, 1, 2), block["subsets"], strict=True):
        videos = list(subset["videos"])
        assert len(videos) == math.ceil(0.5 * len(train)) and set(videos) <= set(train)
        assert set(videos) <= set(draw_subset({v: () for v in train}, 0.75, seed).videos)  # nested
        predicted, _ = ridge_predictions(data, videos, test)
        truth = np.array([data.scores[v] for v in test])
        guess = np.array([predicted[v] for v in test])
        mae = float(np.abs(guess - truth).mean())
        assert subset["metrics"]["MAE"] == pytest.approx(mae, abs=1e-9)
        maes.append(subset["metrics"]["MAE"])
    assert results["metrics"]["MAE"] == pytest.approx(np.mean(maes), abs=1e-9)
    assert results["metrics_std"]["MAE"] == pytest.approx(np.std(maes, ddof=1), abs=1e-9)


def test_cv_draws_within_each_folds_training_videos(store) -> None:  # noqa: F811
    whole = run_skill_cv(store.root, "louo")
    cut = run_skill_cv(store.root, "louo", train_fraction=TrainFraction(0.5, (0, 1)))
    assert [f["test"] for f in cut["folds"]] == [f["test"] for f in whole["folds"]]
    subsets = cut["train_fraction"]["subsets"]
    assert len(subsets) == 2 and all(len(s["folds"]) == len(whole["folds"]) for s in subsets)
    for fold, drawn in zip(whole["folds"], subsets[0]["folds"], strict=True):
        assert not set(drawn["videos"]) & set(fold["test"])
        assert len(drawn["videos"]) == math.ceil(0.5 * drawn["videos_of"])
        assert drawn["videos_of"] == len({v for f in whole["folds"] for v in f["test"]}) - len(fold["test"])


def test_the_commands_take_a_fraction_and_the_temporal_head_refuses_it(store, tmp_path) -> None:  # noqa: F811
    out = tmp_path / "s.json"
    args = [
        "--features",
        str(store.root),
        "--task",
        "skill",
        "--train-fraction",
        "0.5",
        "--fraction-seeds",
        "2",
    ]
    done = runner.invoke(app, ["linear", *args, "--json", str(out)])
    assert done.exit_code == 0, done.output
    assert "1/2 of train" in done.stdout and "mean ± std over 2 subsets" in done.stdout
    results = json.loads(out.read_text())
    assert results["task"] == "linear-skill" and len(results["train_fraction"]["subsets"]) == 2
    done = runner.invoke(app, ["cv", *args, "--folds", "louo", "--json", str(out)])
    assert done.exit_code == 0, done.output
    assert json.loads(out.read_text())["task"] == "cv-linear-skill"
    line = refused("cv", *args, "--folds", "louo", "--protocol", "temporal")
    assert "--train-fraction" in line and "--task skill" in line
