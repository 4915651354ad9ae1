"""Skill metrics against scipy.stats.spearmanr and the rank-difference formula, JIGSAWS' LOSO / LOUO folds,
and the two references (training mean: rho undefined; duration: least squares)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.skill import (
    CONSTANT_NOTE,
    average_ranks,
    duration_prediction,
    fold_scores,
    loso_folds,
    louo_folds,
    skill_scores,
    spearman_rho,
    training_mean_prediction,
    trial_parts,
)

# Suturing's trials in the release (meta_file_Suturing.txt): users B-I, five each, H002 missing
SUTURING = [f"Suturing_{u}{t:03d}" for u in "BCDEFGHI" for t in range(1, 6) if (u, t) != ("H", 2)]


def _rank_difference_rho(x: list[float], y: list[float]) -> float:
    """1 - 6 sum(d^2) / (n (n^2 - 1)), valid without ties."""
    rx = {v: r for r, v in enumerate(sorted(x), 1)}
    ry = {v: r for r, v in enumerate(sorted(y), 1)}
    n = len(x)
    return 1 - 6 * sum((rx[a] - ry[b]) ** 2 for a, b in zip(x, y, strict=True)) / (n * (n * n - 1))


@pytest.mark.parametrize("seed", range(5))
def test_rho_equals_the_rank_difference_formula_without_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = rng.permutation(40)[:12].astype(float).tolist(), rng.normal(size=12).tolist()
    assert spearman_rho(x, y) == pytest.approx(_rank_difference_rho(x, y), abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_rho_equals_scipy_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(6, 31, size=25).astype(float)  # GRS-like integers: many ties
    y = np.round(x + rng.normal(0, 4, size=25))
    assert spearman_rho(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-9)
    assert average_ranks([3, 1, 3, 2]).tolist() == [3.5, 1.0, 3.5, 2.0]


def test_scores_and_the_training_mean_reference() -> None:
    target = {"a": 10.0, "b": 20.0, "c": 15.0, "d": 25.0}
    scores = skill_scores({"a": 12.0, "b": 18.0, "c": 15.0, "d": 30.0}, target)
    assert scores["spearman_rho"] == pytest.approx(1.0) and scores["mae"] == pytest.approx(
        (2 + 2 + 0 + 5) / 4
    )
    constant = training_mean_prediction([10.0, 20.0, 24.0], ["a", "b", "c", "d"])
    assert set(constant.values()) == {18.0}
    mean_row = skill_scores(constant, target)
    assert mean_row["spearman_rho"] is None and mean_row["note"] == CONSTANT_NOTE
    assert mean_row["mae"] == pytest.approx((8 + 2 + 3 + 7) / 4)


def test_duration_reference_is_least_squares() -> None:
    rng = np.random.default_rng(0)
    durations = rng.uniform(60, 300, size=10)
    scores = 30 - 0.05 * durations + rng.normal(0, 1, size=10)
    slope, intercept = np.polyfit(durations, scores, 1)
    predicted = duration_prediction(durations, scores, {"x": 100.0, "y": 250.0})
    assert predicted["x"] == pytest.approx(intercept + slope * 100.0)
    assert predicted["y"] == pytest.approx(intercept + slope * 250.0)
    with pytest.raises(EvaluationError, match="two training videos of different durations"):
        duration_prediction([100.0, 100.0], [10.0, 20.0], {"x": 1.0})


def test_loso_and_louo_follow_the_experimental_setup() -> None:
    assert trial_parts("Needle_Passing_H004") == ("Needle_Passing", "H", 4)
    loso = loso_folds(SUTURING)
    assert [f["name"] for f in loso] == [f"loso-{k}" for k in range(1, 6)]
    assert loso[1]["test"] == [f"Suturing_{u}002" for u in "BCDEFGI"]  # H002 is not in the release
    louo = louo_folds(SUTURING)
    assert [f["name"] for f in louo] == [f"louo-{u}" for u in "BCDEFGHI"]
    assert louo[6]["test"] == ["Suturing_H001", "Suturing_H003", "Suturing_H004", "Suturing_H005"]
    for folds in (loso, louo):  # every trial is held out exactly once, never trained on in its fold
        held_out = [v for f in folds for v in f["test"]]
        assert sorted(held_out) == sorted(SUTURING)
        assert all(not set(f["test"]) & set(f["train"]) and f["val"] == [] for f in folds)
        assert all(len(f["train"]) + len(f["test"]) == len(SUTURING) for f in folds)
    with pytest.raises(EvaluationError, match="not a JIGSAWS trial name"):
        loso_folds(["video01"])


def test_fold_scores_pool_the_held_out_videos() -> None:
    rng = np.random.default_rng(1)
    target = {v: float(rng.integers(6, 31)) for v in SUTURING}
    predictions = [{v: target[v] + rng.normal(0, 3) for v in fold["test"]} for fold in louo_folds(SUTURING)]
    result = fold_scores(predictions, target)
    pooled = {v: s for fold in predictions for v, s in fold.items()}
    assert result["pooled"]["n_videos"] == len(SUTURING)
    assert result["pooled"]["spearman_rho"] == pytest.approx(
        spearmanr([pooled[v] for v in SUTURING], [target[v] for v in SUTURING]).statistic, abs=1e-9
    )
    rhos = [spearmanr(list(f.values()), [target[v] for v in f]).statistic for f in predictions]
    assert result["mean_spearman_rho"] == pytest.approx(float(np.nanmean(rhos)), abs=1e-9)


def test_bad_input_is_one_line() -> None:
    with pytest.raises(EvaluationError, match="no true score for video"):
        skill_scores({"x": 1.0}, {"y": 2.0})
    with pytest.raises(EvaluationError, match="must be finite"):
        skill_scores({"x": float("nan"), "y": 1.0}, {"x": 1.0, "y": 2.0})
