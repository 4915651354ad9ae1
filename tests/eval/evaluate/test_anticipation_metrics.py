"""Anticipation targets and the wMAE family: hand-worked cases, edge cases, and a plain-loop re-implementation
of the reference's definitions (REFERENCE.md section 9) compared on random videos."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.anticipation import (
    METRICS,
    anticipation_scores,
    anticipation_scores_per_video,
    anticipation_targets,
    phase_presence,
)

pytestmark = pytest.mark.filterwarnings("error")  # an empty mask must never raise a RuntimeWarning


# ---------------------------------------------------- the loop formulation, written from the definitions


def loop_targets(present: list[list[bool]], times_s: list[float], horizon: float) -> list[list[float]]:
    """Per frame and class: scan forward for the class; minutes to it, capped at the horizon."""
    out = []
    for f in range(len(times_s)):
        row = []
        for c in range(len(present[0])):
            minutes = horizon
            for g in range(f, len(times_s)):
                if present[g][c]:
                    minutes = min((times_s[g] - times_s[f]) / 60.0, horizon)
                    break
            row.append(minutes)
        out.append(row)
    return out


def loop_class_scores(y: list[float], t: list[float], h: float, low: float, high: float) -> dict[str, float]:
    """One class's MAEs (low, high = 0.1h, 0.9h). NaN where no frame qualifies (the reference's mean)."""
    buckets: dict[str, list[float]] = {m: [] for m in METRICS if m != "wMAE"}
    for yi, ti in zip(y, t, strict=True):
        err = abs(yi - ti)
        if ti == h:
            buckets["outMAE"].append(err)
        if 0 < ti < h:
            buckets["inMAE"].append(err)
        if low < yi < high:
            buckets["pMAE"].append(err)
        if 0 < ti < low:
            buckets["eMAE"].append(err)
        if high < ti < h:
            buckets["dMAE"].append(err)
        if low < ti < high:
            buckets["mMAE"].append(err)
    scores = {m: (sum(v) / len(v) if v else math.nan) for m, v in buckets.items()}
    scores["wMAE"] = (scores["outMAE"] + scores["inMAE"]) / 2  # NaN if either half is NaN
    return scores


def loop_scores(y: np.ndarray, t: np.ndarray, horizon: float, dtype: type = np.float64) -> dict:
    """Per class over all frames given, then the plain mean over classes (NaN if any class is NaN).

    The horizon and thresholds are rounded to the targets' dtype, as numpy does when the reference compares a
    float32 array with a Python float (``t == horizon``, ``t > horizon * .1``).
    """
    h, low, high = (float(dtype(v)) for v in (horizon, horizon * 0.1, horizon * 0.9))
    per_class = [
        loop_class_scores([float(v) for v in y[:, c]], [float(v) for v in t[:, c]], h, low, high)
        for c in range(t.shape[1])
    ]
    mean = {}
    for m in METRICS:
        values = [s[m] for s in per_class]
        mean[m] = math.nan if any(math.isnan(v) for v in values) else sum(values) / len(values)
    return {"per_class": {m: [s[m] for s in per_class] for m in METRICS}, "mean": mean}


def same(got: float | None, want: float) -> bool:
    return (got is None and math.isnan(want)) or (got is not None and got == pytest.approx(want, abs=1e-9))


def assert_scores_match(got: dict, want: dict) -> None:
    for m in METRICS:
        assert same(got["mean"][m], want["mean"][m]), (m, got["mean"][m], want["mean"][m])
        for g, w in zip(got["per_class"][m], want["per_class"][m], strict=True):
            assert same(g, w), (m, got["per_class"][m], want["per_class"][m])


def random_video(rng: np.random.Generator, classes: int) -> tuple[np.ndarray, np.ndarray]:
    frames = int(rng.integers(1, 60))
    steps = rng.choice([1, 1, 1, 6, 6, 30, 90], size=frames)  # integer seconds; some gaps of missing frames
    times = np.cumsum(steps).astype(np.float64) - steps[0]
    present = rng.random((frames, classes)) < rng.uniform(0.0, 0.4, size=classes)  # some classes never occur
    return present, times


# ---------------------------------------------------------------- targets


def test_targets_by_hand_with_a_gap_and_a_class_at_frame_zero() -> None:
    # Frames at 0, 60, 180, 240 s (the frame at 120 s is missing). Class 0 appears at 180 s, class 1 only at
    # 0 s, class 2 never. Horizon 2.5 min.
    present = np.array([[0, 1, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0]], dtype=bool)
    times = np.array([0.0, 60.0, 180.0, 240.0])
    targets = anticipation_targets(present, times, 2.5)
    assert targets.dtype == np.float32
    expected = np.array(
        [
            [2.5, 0.0, 2.5],  # class 0 is 3 min away: clipped; class 1 present now
            [2.0, 2.5, 2.5],  # class 0: 120 s away across the gap (not one frame step)
            [0.0, 2.5, 2.5],
            [2.5, 2.5, 2.5],  # nothing comes again: the horizon
        ],
        dtype=np.float32,
    )
    np.testing.assert_array_equal(targets, expected)


def test_a_horizon_longer_than_the_video_never_clips() -> None:
    present = np.array([[0], [0], [0], [1], [0]], dtype=bool)
    times = np.arange(5) * 30.0  # 2 minutes of video, horizon 10 minutes
    targets = anticipation_targets(present, times, 10.0)[:, 0]
    np.testing.assert_array_equal(targets, np.array([1.5, 1.0, 0.5, 0.0, 10.0], dtype=np.float32))


@pytest.mark.parametrize("seed", range(20))
def test_targets_match_the_loop_on_random_videos(seed: int) -> None:
    rng = np.random.default_rng(seed)
    present, times = random_video(rng, classes=4)
    horizon = float(rng.choice([0.5, 1.0, 2.0, 3.0, 0.7]))
    got = anticipation_targets(present, times, horizon)
    want = np.array(loop_targets(present.tolist(), times.tolist(), horizon), dtype=np.float32)
    np.testing.assert_array_equal(got, want)


def test_phase_presence_one_hot_and_unlabelled_nowhere() -> None:
    got = phase_presence(np.array([0, 2, -1, 1]), 3)
    np.testing.assert_array_equal(got, np.array([[1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 1, 0]], dtype=bool))
    with pytest.raises(EvaluationError, match="-1..2"):
        phase_presence(np.array([0, 3]), 3)


@pytest.mark.parametrize(
    "present, times, horizon",
    [
        (np.zeros((3, 1), bool), np.array([0.0, 2.0, 1.0]), 1.0),  # not increasing
        (np.zeros((3, 1), bool), np.array([0.0, 1.0]), 1.0),  # wrong length
        (np.zeros((2, 1), int), np.array([0.0, 1.0]), 1.0),  # not boolean
        (np.zeros((2, 1), bool), np.array([0.0, 1.0]), 0.0),  # no horizon
    ],
)
def test_targets_refuse_bad_input(present: np.ndarray, times: np.ndarray, horizon: float) -> None:
    with pytest.raises(EvaluationError):
        anticipation_targets(present, times, horizon)


# ---------------------------------------------------------------- scores


def test_scores_by_hand() -> None:
    # Horizon 1 min. Class 0: every mask filled; class 1 never occurs (all targets at the horizon), so its
    # inside masks are empty and the class means of those metrics are NaN, as the reference's np.mean.
    t0 = [1.0, 0.5, 0.05, 0.95, 0.0]
    y0 = [0.8, 0.5, 0.2, 0.9, 0.3]
    t1 = [1.0] * 5
    y1 = [1.0, 0.6, 0.95, 0.5, 1.0]
    got = anticipation_scores(np.array([y0, y1]).T, np.array([t0, t1]).T, 1.0, class_names=["hook", "bag"])
    assert got["classes"] == ["hook", "bag"] and got["horizon_min"] == 1.0
    c0 = {name: values[0] for name, values in got["per_class"].items()}
    assert c0["outMAE"] == pytest.approx(0.2)  # frame 0
    assert c0["inMAE"] == pytest.approx((0.0 + 0.15 + 0.05) / 3)  # frames 1-3
    assert c0["wMAE"] == pytest.approx((0.2 + 0.2 / 3) / 2)
    assert c0["pMAE"] == pytest.approx((0.2 + 0.0 + 0.15 + 0.3) / 4)  # y in (0.1, 0.9): frames 0, 1, 2, 4
    assert c0["eMAE"] == pytest.approx(0.15)  # frame 2
    assert c0["dMAE"] == pytest.approx(0.05)  # frame 3
    assert c0["mMAE"] == pytest.approx(0.0)  # frame 1
    c1 = {name: values[1] for name, values in got["per_class"].items()}
    assert c1["outMAE"] == pytest.approx((0 + 0.4 + 0.05 + 0.5 + 0) / 5)
    assert c1["pMAE"] == pytest.approx((0.4 + 0.5) / 2)  # predictions 0.6 and 0.5
    assert c1["inMAE"] is None and c1["wMAE"] is None and c1["eMAE"] is None
    assert c1["dMAE"] is None and c1["mMAE"] is None
    assert got["mean"]["outMAE"] == pytest.approx((0.2 + 0.19) / 2)
    assert got["mean"]["pMAE"] == pytest.approx((0.1625 + 0.45) / 2)
    for metric in ("wMAE", "inMAE", "eMAE", "dMAE", "mMAE"):
        assert got["mean"][metric] is None  # one NaN class makes the reference's mean over classes NaN


def test_a_class_present_everywhere_has_only_empty_masks_but_its_prediction_mask() -> None:
    targets = np.zeros((5, 1), np.float32)
    got = anticipation_scores(np.array([[0.0], [0.5], [2.0], [0.2], [0.3]]), targets, 2.0)
    assert got["per_class"]["outMAE"] == [None] and got["per_class"]["inMAE"] == [None]
    assert got["per_class"]["pMAE"] == [pytest.approx((0.5 + 0.3) / 2)]  # 0.2 < y < 1.8 (strict)


@pytest.mark.parametrize("seed", range(25))
def test_pooled_scores_match_the_loop_on_random_videos(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    horizon = float(rng.choice([0.5, 1.0, 2.0, 3.0, 0.7]))
    videos = [random_video(rng, classes=3) for _ in range(int(rng.integers(1, 5)))]
    targets = np.concatenate([anticipation_targets(p, t, horizon) for p, t in videos])
    predictions = np.clip(targets + rng.normal(0, horizon / 4, targets.shape), 0, horizon)
    exact = rng.random(targets.shape) < 0.2
    predictions[exact] = targets[exact]  # some exact hits, some predictions on the mask boundaries
    got = anticipation_scores(predictions, targets, horizon)
    assert_scores_match(got, loop_scores(predictions, targets, horizon, dtype=np.float32))


@pytest.mark.parametrize("seed", range(10))
def test_float64_targets_match_the_loop(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    horizon = 2.0
    targets = rng.choice([0.0, 0.1, 0.2, 1.0, 1.8, 1.9, 2.0], size=(40, 3)) * rng.choice(
        [1.0, 0.5], size=(40, 3)
    )
    predictions = rng.uniform(0, horizon, size=targets.shape)
    assert_scores_match(
        anticipation_scores(predictions, targets, horizon), loop_scores(predictions, targets, 2.0)
    )


def test_float32_targets_at_a_horizon_not_exact_in_float32_are_outside() -> None:
    # 0.7 is not a float32 number: the never-occurring class sits at float32(0.7) and must still count as
    # outside the horizon.
    targets = anticipation_targets(np.zeros((3, 1), bool), np.array([0.0, 1.0, 2.0]), 0.7)
    got = anticipation_scores(np.full((3, 1), 0.5), targets, 0.7)
    assert got["per_class"]["outMAE"] == [pytest.approx(0.2, abs=1e-6)]


@pytest.mark.parametrize("seed", range(10))
def test_per_video_scores_match_the_loop(seed: int) -> None:
    rng = np.random.default_rng(500 + seed)
    horizon = float(rng.choice([1.0, 2.0, 3.0]))
    videos = [random_video(rng, classes=3) for _ in range(int(rng.integers(1, 5)))]
    targets = [anticipation_targets(p, t, horizon) for p, t in videos]
    predictions = [np.clip(t + rng.normal(0, 0.5, t.shape), 0, horizon) for t in targets]
    got = anticipation_scores_per_video(predictions, targets, horizon)
    assert got["videos"] == len(videos)
    per_video = [
        loop_scores(y, t, horizon, dtype=np.float32) for y, t in zip(predictions, targets, strict=True)
    ]
    for got_video, want_video in zip(got["per_video"], per_video, strict=True):
        assert_scores_match(got_video, want_video)
    # Per class: the mean over the videos where it is defined; then the plain mean over classes.
    for m in METRICS:
        want_class = []
        for c in range(3):
            defined = [v["per_class"][m][c] for v in per_video if not math.isnan(v["per_class"][m][c])]
            want_class.append(sum(defined) / len(defined) if defined else math.nan)
        for g, w in zip(got["per_class"][m], want_class, strict=True):
            assert same(g, w), (m, got["per_class"][m], want_class)
        want_mean = math.nan if any(math.isnan(v) for v in want_class) else sum(want_class) / 3
        assert same(got["mean"][m], want_mean)


def test_per_video_skips_the_video_where_a_class_is_undefined() -> None:
    # Video A: class inside the horizon at every frame (no outside frame); video B: class never occurs.
    t_a, y_a = np.array([[0.5], [0.5]]), np.array([[0.7], [0.5]])
    t_b, y_b = np.array([[1.0], [1.0]]), np.array([[0.4], [1.0]])
    got = anticipation_scores_per_video([y_a, y_b], [t_a, t_b], 1.0)
    assert got["per_class"]["inMAE"] == [pytest.approx(0.1)]  # video A only
    assert got["per_class"]["outMAE"] == [pytest.approx(0.3)]  # video B only
    assert got["per_class"]["wMAE"] == [None]  # defined in neither video
    assert got["per_video"][0]["mean"]["outMAE"] is None


def test_scores_refuse_bad_input() -> None:
    with pytest.raises(EvaluationError, match="differ in shape"):
        anticipation_scores(np.zeros((3, 2)), np.zeros((3, 1)), 1.0)
    with pytest.raises(EvaluationError, match="NaN"):
        anticipation_scores(np.array([[np.nan]]), np.zeros((1, 1)), 1.0)
    with pytest.raises(EvaluationError, match="class names"):
        anticipation_scores(np.zeros((3, 2)), np.zeros((3, 2)), 1.0, class_names=["a"])
    with pytest.raises(EvaluationError, match="No videos"):
        anticipation_scores_per_video([], [], 1.0)
