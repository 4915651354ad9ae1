"""Paired comparisons of reproduce rows: pairing by seed, hand-computed t intervals, the markdown tables."""

from __future__ import annotations

import dataclasses
import math

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train.reproduce import tables as reproduce_tables
from plstitch_train.reproduce.stats import (
    COLUMN_FORMATS,
    Comparison,
    comparisons_markdown,
    paired_comparisons,
    per_seed_markdown,
    values_by_seed,
)

T2_975 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # t quantile, 2 dof: (2q - 1) / sqrt(2 q (1 - q)) = 4.3027
T1_975 = math.tan(math.pi * 0.475)  # t quantile, 1 dof (Cauchy): tan(pi (q - 1/2)) = 12.706


def _run(row, seed, knn, linear, reverse=False, tau=None, grad=None):
    metrics = {p: {"accuracy": v, "macro_f1_video": v / 2} for p, v in (("knn", knn), ("linear", linear))}
    run = {"row": row, "seed": seed, "reverse_time": reverse, "metrics": metrics}
    run["order"] = {"time_r2": None, "tau": tau, "jigsaw_minus_chance": None}
    if grad is not None:
        run["gradients"] = {"branches": {"vid": {"backbone_grad_norm": grad}}}
    return run


def _runs() -> dict[str, dict]:
    return {
        # mim listed out of seed order: pairing must go by seed, not by position
        "mim-seed2": _run("mim", 2, 61.0, 68.0),
        "mim-seed0": _run("mim", 0, 61.0, 70.0),
        "mim-seed1": _run("mim", 1, 64.0, 72.0),
        "pl-seed0": _run("pl", 0, 70.0, 80.0, tau=0.5, grad=0.1),
        "pl-seed1": _run("pl", 1, 74.0, 81.0, tau=0.6, grad=0.2),
        "pl-seed2": _run("pl", 2, 72.0, 79.0, tau=0.7, grad=0.4),
        "pl-reversed-seed0": _run("pl", 0, 60.0, 80.0, reverse=True, tau=-0.5),
        "pl-reversed-seed1": _run("pl", 1, 66.0, 80.0, reverse=True, tau=-0.6),
        "pl-reversed-seed2": _run("pl", 2, 63.0, 80.0, reverse=True, tau=-0.7),
        "random-init-seed0": _run("random-init", 0, 20.0, 30.0),
        "random-init-seed1": _run("random-init", 1, 22.0, 30.0),
        "raw-pixels": _run("raw-pixels", 0, 40.0, 45.0),
        "pl-seed3": {"row": "pl", "seed": 3, "reverse_time": False},  # not evaluated: no metrics, ignored
    }


def _by(results, label, column):
    (found,) = [r for r in results if r["label"] == label and r["column"] == column]
    return found


def test_pairs_by_seed_with_hand_computed_intervals() -> None:
    comparisons = [
        Comparison("pl", "mim", "PL-Stitch - MIM only"),
        Comparison("pl", "random-init", "PL-Stitch - random init"),
        Comparison("pl", "pl-reversed", "forward - reversed"),
        Comparison("pl", "raw-pixels", "PL-Stitch - raw pixels"),
        Comparison("mim-jigsaw", "mim", "absent row"),
    ]
    results = paired_comparisons(
        _runs(), comparisons, columns=("knn/accuracy", "linear/accuracy", "order/tau")
    )
    assert {r["label"] for r in results} == {c.label for c in comparisons[:4]}  # absent row skipped
    assert len(results) == 4 * 3

    knn = _by(results, "PL-Stitch - MIM only", "knn/accuracy")  # per seed 9, 10, 11
    assert knn["seeds"] == [0, 1, 2] and knn["missing_in_a"] == [] and knn["missing_in_b"] == []
    assert knn["a_values"] == [70.0, 74.0, 72.0] and knn["b_values"] == [61.0, 64.0, 61.0]
    d = knn["difference"]
    assert d["n"] == 3 and d["mean"] == pytest.approx(10.0) and d["std"] == pytest.approx(1.0)
    half = T2_975 / math.sqrt(3)
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((10.0 - half, 10.0 + half))
    # linear per seed 10, 9, 11 (std 1); paired in listing order it would be 12, 11, 7 (std 2.6)
    lin = _by(results, "PL-Stitch - MIM only", "linear/accuracy")["difference"]
    assert lin["mean"] == pytest.approx(10.0) and lin["std"] == pytest.approx(1.0)

    rand = _by(results, "PL-Stitch - random init", "knn/accuracy")  # seeds 0, 1: 50, 52
    assert rand["seeds"] == [0, 1] and rand["missing_in_b"] == [2] and rand["missing_in_a"] == []
    d = rand["difference"]
    assert d["mean"] == pytest.approx(51.0) and d["sem"] == pytest.approx(1.0)
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((51.0 - T1_975, 51.0 + T1_975))

    rev = _by(results, "forward - reversed", "order/tau")["difference"]  # 1.0, 1.2, 1.4
    assert rev["mean"] == pytest.approx(1.2) and rev["std"] == pytest.approx(0.2)
    rev_lin = _by(results, "forward - reversed", "linear/accuracy")["difference"]  # 0, 1, -1
    assert rev_lin["mean"] == pytest.approx(0.0) and rev_lin["std"] == pytest.approx(1.0)

    tau = _by(results, "PL-Stitch - MIM only", "order/tau")  # MIM has no temporal head
    assert tau["seeds"] == [] and tau["missing_in_b"] == [0, 1, 2] and tau["difference"] is None
    one = _by(results, "PL-Stitch - raw pixels", "knn/accuracy")
    assert one["seeds"] == [0] and one["missing_in_b"] == [1, 2]
    assert one["difference"]["mean"] == pytest.approx(30.0) and one["difference"]["ci_low"] is None


def test_comparisons_markdown() -> None:
    comparisons = [
        Comparison("pl", "mim", "PL-Stitch - MIM only"),
        Comparison("pl", "random-init", "PL-Stitch - random init"),
        Comparison("pl", "pl-reversed", "forward - reversed"),
        Comparison("pl", "raw-pixels", "PL-Stitch - raw pixels"),
    ]
    columns = ("knn/accuracy", "order/tau")
    text = comparisons_markdown(paired_comparisons(_runs(), comparisons, columns=columns))
    lines = text.splitlines()
    assert lines[0] == "| comparison | metric | difference (a − b) | 95 % CI | test | seeds |"
    # 10 +- 4.3027 / sqrt(3) = [7.52, 12.48]
    assert "| PL-Stitch - MIM only | k-NN Acc | +10.0 | [7.5, 12.5] | paired | 0, 1, 2 |" in lines
    assert (
        "| PL-Stitch - MIM only | Kendall τ (head) | n/a | n/a | paired "
        "| none (seeds 0, 1, 2 missing in mim) |" in lines
    )
    # 51 +- 12.706 = [38.29, 63.71]
    assert (
        "| PL-Stitch - random init | k-NN Acc | +51.0 | [38.3, 63.7] | paired "
        "| 0, 1 (seed 2 missing in random-init) |" in lines
    )
    # tau: 1.2 +- 4.3027 * 0.2 / sqrt(3) = [0.70, 1.70]; two decimals for order measures
    assert "| forward - reversed | Kendall τ (head) | +1.20 | [0.70, 1.70] | paired | 0, 1, 2 |" in lines
    assert (
        "| PL-Stitch - raw pixels | k-NN Acc | +30.0 | n/a | paired | 0 (seeds 1, 2 missing in raw-pixels) |"
        in lines
    )
    legend = lines[-1]
    assert lines[-2] == "" and "Student t" in legend and "n − 1" in legend and "paired by seed" in legend
    wide = paired_comparisons(_runs(), comparisons[:1], confidence=0.99)
    assert "| 99 % CI |" in comparisons_markdown(wide).splitlines()[0]


def test_per_seed_markdown() -> None:
    rows = [("pl", "PL-Stitch"), ("random-init", "random init"), ("mim-jigsaw", "no runs"), ("mim", "MIM")]
    text = per_seed_markdown(_runs(), rows)
    assert text.splitlines() == [
        "| Row (k-NN Acc) | seed 0 | seed 1 | seed 2 |",
        "|---|---:|---:|---:|",
        "| PL-Stitch | 70.0 | 74.0 | 72.0 |",
        "| random init | 20.0 | 22.0 | - |",
        "| MIM | 61.0 | 64.0 | 61.0 |",
    ]
    tau = per_seed_markdown(_runs(), [("pl-reversed", "reversed")], column="order/tau").splitlines()
    assert tau[-1] == "| reversed | -0.50 | -0.60 | -0.70 |"


def test_refusals() -> None:
    runs = _runs()
    with pytest.raises(ConfigError, match="Unknown column 'knn/acc'"):
        paired_comparisons(runs, [Comparison("pl", "mim", "x")], columns=("knn/acc",))
    runs["pl-again-seed1"] = _run("pl", 1, 1.0, 1.0)
    with pytest.raises(ConfigError, match="Row 'pl' has two runs of seed 1"):
        paired_comparisons(runs, [Comparison("pl", "mim", "x")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        Comparison("pl", "mim", "x").a = "mim"  # type: ignore[misc]


def test_values_by_seed_agree_with_the_aggregated_tables() -> None:
    runs = _runs()
    aggregated = reproduce_tables.aggregate(runs)
    for column in COLUMN_FORMATS:
        ours = values_by_seed(runs, column)
        for key, stats in aggregated.items():
            if column in stats:  # aggregate keeps a column only where every seed has it
                assert stats[column]["values"] == [ours[key][s] for s in sorted(ours[key])]
    assert aggregated["pl"]["grad/vid"]["values"] == [0.1, 0.2, 0.4]


def test_random_init_is_compared_unpaired_with_welch() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    comparison = Comparison("mim", "random-init", "MIM only - random init", paired=False)
    (result,) = paired_comparisons(_runs(), [comparison], columns=("knn/accuracy",))
    assert not result["paired"] and result["seeds"] == [0, 1, 2]
    assert result["a_values"] == [61.0, 64.0, 61.0] and result["b_values"] == [20.0, 22.0]
    ref = scipy_stats.ttest_ind([61.0, 64.0, 61.0], [20.0, 22.0], equal_var=False)
    assert result["difference"]["mean"] == pytest.approx(62.0 - 21.0)
    assert result["difference"]["t"] == pytest.approx(float(ref.statistic))
    line = comparisons_markdown([result]).splitlines()[2]
    assert line.startswith("| MIM only - random init | k-NN Acc | +41.0 | [")
    assert "| unpaired (Welch) |" in line
