"""The training-fraction rule (`protocols/fractions.py`): subsets fixed by seed, nested across fractions,
classes covered where possible and said where not, inputs checked in one line naming the flag."""

from __future__ import annotations

import logging
import math

import pytest

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.protocols.fractions import (
    SubsetDraw,
    TrainFraction,
    draw_subset,
    fraction_config,
    fraction_label,
    fraction_title,
    over_subsets,
    parse_fraction_seeds,
    parse_fractions,
    subset_order,
    subset_size,
)

ALL = ("a", "b", "c", "d")
# 16 training videos with every class, so only the seeded ranking decides the subsets
EVERY_CLASS = {f"video{i:02d}": ALL for i in range(16)}
# class "rare" only in video13: a subset of one video cannot hold every class, of two it can
RARE = {**{f"video{i:02d}": ("a", "b") for i in range(16)}, "video13": ("a", "b", "rare")}
FRACTIONS = (0.125, 0.25, 0.5, 1.0)


def test_a_subset_is_fixed_by_its_seed_and_not_by_the_order_of_the_videos() -> None:
    first = draw_subset(EVERY_CLASS, 0.25, seed=3)
    assert draw_subset(EVERY_CLASS, 0.25, seed=3) == first
    reversed_order = dict(reversed(list(EVERY_CLASS.items())))
    assert set(draw_subset(reversed_order, 0.25, seed=3).videos) == set(first.videos)
    assert len(first.videos) == 4 and first.of == 16
    assert list(first.videos) == sorted(first.videos)  # kept in the order given (the probe's frame order)
    others = {draw_subset(EVERY_CLASS, 0.25, seed=s).videos for s in range(8)}
    assert len(others) > 4  # other seeds draw other videos


def test_a_video_keeps_its_rank_whatever_other_videos_there_are() -> None:
    """The rank is a seeded hash of the name: dropping a video never reshuffles the others (CV folds)."""
    fewer = {v: c for v, c in EVERY_CLASS.items() if v != "video07"}
    ranked = [v for v in subset_order(EVERY_CLASS, 5) if v != "video07"]
    assert subset_order(fewer, 5) == ranked
    assert set(draw_subset(fewer, 0.25, 5).videos) == set(ranked[:4])


@pytest.mark.parametrize("classes", [EVERY_CLASS, RARE], ids=["every-class", "rare-class"])
def test_subsets_nest_for_every_seed(classes: dict) -> None:
    for seed in range(20):
        subsets = [set(draw_subset(classes, f, seed).videos) for f in FRACTIONS]
        for smaller, larger in zip(subsets, subsets[1:], strict=False):
            assert smaller < larger, (seed, smaller, larger)
        assert subsets[-1] == set(classes)


def test_subset_size_is_the_ceiling_at_least_one() -> None:
    assert [subset_size(16, f) for f in FRACTIONS] == [2, 4, 8, 16]
    assert subset_size(13, 0.125) == 2 and subset_size(30, 0.1) == 3  # 0.1 * 30 is 3.0000000000000004
    assert subset_size(3, 0.01) == 1


def test_every_class_is_present_where_possible() -> None:
    for seed in range(20):
        subset = draw_subset(RARE, 0.125, seed)  # 2 of 16: video13 comes first or second
        assert "video13" in subset.videos and subset.missing_classes == ()


def test_a_fraction_that_leaves_out_a_class_is_recorded() -> None:
    one_class_each = {"v1": ("a",), "v2": ("b",), "v3": ("c",), "v4": ("a",)}
    subset = draw_subset(one_class_each, 0.25, seed=0)  # one video of four: two classes out
    assert len(subset.videos) == 1 and len(subset.missing_classes) == 2
    assert subset.record()["missing_classes"] == list(subset.missing_classes)


def test_over_subsets_says_a_missing_class_in_one_line_and_combines_the_seeds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    one_class_each = {"v1": ("a",), "v2": ("b",), "v3": ("c",), "v4": ("a",)}

    def run(draw: SubsetDraw | None) -> dict:
        subset = draw.take(one_class_each)
        accuracy = 10.0 * len(subset.videos) + draw.seed
        return {"task": "toy", "metrics": {"accuracy": accuracy}, "per_video": {"t1": {"accuracy": accuracy}}}

    with caplog.at_level(logging.WARNING, logger="plstitch"):
        results = over_subsets(run, TrainFraction(0.25, (0, 1, 2)))
    lines = [r.getMessage() for r in caplog.records if "--train-fraction" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "1 of 4" in lines[0]
    block = results["train_fraction"]
    assert block["fraction"] == 0.25 and block["seeds"] == [0, 1, 2]
    assert [s["metrics"]["accuracy"] for s in block["subsets"]] == [10.0, 11.0, 12.0]
    assert all(s["missing_classes"] and len(s["videos"]) == 1 for s in block["subsets"])
    assert results["metrics"]["accuracy"] == pytest.approx(11.0)
    assert results["metrics_std"]["accuracy"] == pytest.approx(1.0)  # sample std (ddof=1)
    assert results["per_video"]["t1"]["accuracy"] == pytest.approx(11.0)


def test_a_fraction_below_one_video_is_said_and_the_title_counts_the_videos(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 64: 0.01 of 16 videos rounds up to 1 video: a line says so, the title says `1 of 16 videos`."""

    def run(draw: SubsetDraw | None) -> dict:
        draw.take(EVERY_CLASS)
        return {"task": "toy", "metrics": {"accuracy": 1.0}, "per_video": {}}

    fraction = TrainFraction(0.01, (0, 1, 2))
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        results = over_subsets(run, fraction)
    lines = [r.getMessage() for r in caplog.records if "less than one video" in r.getMessage()]
    assert lines == [
        "--train-fraction 0.01 of 16 training videos is less than one video; each subset holds 1 video "
        "(1 of 16)."
    ]
    assert fraction_title(fraction, results) == ", 0.01 of train (1 of 16 videos), mean ± std over 3 subsets"
    assert fraction_title(fraction) == ", 0.01 of train, mean ± std over 3 subsets"  # before a run
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        quarter = over_subsets(run, TrainFraction(0.25, (0,)))  # 4 of 16: nothing rounded up to say
    assert not [r for r in caplog.records if "less than one video" in r.getMessage()]
    assert (
        fraction_title(TrainFraction(0.25, (0,)), quarter)
        == ", 1/4 of train (4 of 16 videos), mean ± std over 1 subset"
    )


def test_the_title_of_a_cv_run_counts_the_videos_of_each_fold() -> None:
    pools = [dict(list(EVERY_CLASS.items())[:12]), dict(list(EVERY_CLASS.items())[:13])]

    def run(draw: SubsetDraw | None) -> dict:
        for pool in pools:  # one draw per fold, as `run_cv` does
            draw.take(pool)
        return {"task": "toy", "metrics": {"accuracy": 1.0}, "per_video": {}}

    fraction = TrainFraction(0.25, (0, 1))
    title = fraction_title(fraction, over_subsets(run, fraction))
    assert title == ", 1/4 of train (3 of 12, 4 of 13 videos), mean ± std over 2 subsets"


def test_fraction_one_runs_once_without_a_draw() -> None:
    calls = []

    def run(draw: SubsetDraw | None) -> dict:
        calls.append(draw)
        return {"metrics": {"accuracy": 1.0}}

    assert over_subsets(run, TrainFraction(1.0, (0, 1, 2))) == {"metrics": {"accuracy": 1.0}}
    assert over_subsets(run, None) == {"metrics": {"accuracy": 1.0}}
    assert calls == [None, None]


def test_a_protocol_that_draws_nothing_is_refused() -> None:
    with pytest.raises(EvaluationError, match="drew no training subset"):
        over_subsets(lambda draw: {"task": "toy", "metrics": {}}, TrainFraction(0.5, (0,)))


@pytest.mark.parametrize("fraction", [0, -0.5, 1.5, math.nan])
def test_a_fraction_outside_zero_one_names_the_flag(fraction: float) -> None:
    with pytest.raises(ConfigError, match="--train-fraction"):
        TrainFraction(fraction)


def test_seeds_are_a_count_or_a_list() -> None:
    assert parse_fraction_seeds("3") == (0, 1, 2)
    assert parse_fraction_seeds(2) == (0, 1)
    assert parse_fraction_seeds("0,4,9") == (0, 4, 9)
    assert parse_fraction_seeds("7,") == (7,)
    for bad in ("", "x", "0", "-1,2", "1,1", "1.5"):
        with pytest.raises(ConfigError, match="--fraction-seeds"):
            parse_fraction_seeds(bad)
    assert fraction_config(None, None) is None
    assert fraction_config(0.5, None) == TrainFraction(0.5, (0, 1, 2))
    with pytest.raises(ConfigError, match="--fraction-seeds needs --train-fraction"):
        fraction_config(None, "3")


def test_fractions_list() -> None:
    assert parse_fractions("1,1/8, 0.25,0.5") == FRACTIONS
    for bad in ("0,1", "2", "x", ","):
        with pytest.raises(ConfigError, match="--fractions"):
            parse_fractions(bad)
    assert [fraction_label(f) for f in FRACTIONS] == ["1/8", "1/4", "1/2", "all"]
