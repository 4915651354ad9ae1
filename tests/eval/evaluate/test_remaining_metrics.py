"""Remaining surgery duration: targets, MAE over whole videos and their last minutes, the naive references;
hand-worked values and plain-loop re-implementations on random videos."""

from __future__ import annotations

import math

import numpy as np
import pytest

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.remaining import (
    mean_target_at_elapsed,
    naive_rsd,
    remaining_targets,
    rsd_scores,
    video_end_s,
)

pytestmark = pytest.mark.filterwarnings("error")


# ---------------------------------------------------------------- targets


def test_targets_by_hand_with_a_gap() -> None:
    # 1-fps frames at 0, 1, 2, 4 s (3 s missing): steps 1, 1, 2, median 1, so the video ends at 5 s.
    times = np.array([0.0, 1.0, 2.0, 4.0])
    assert video_end_s(times) == 5.0
    np.testing.assert_allclose(remaining_targets(times), np.array([5.0, 4.0, 3.0, 1.0]) / 60)
    np.testing.assert_allclose(remaining_targets(times, end_s=10.0), np.array([10.0, 9.0, 8.0, 6.0]) / 60)


def test_targets_of_a_video_not_starting_at_zero() -> None:
    times = np.array([30.0, 90.0, 150.0])  # one frame a minute, from 30 s
    np.testing.assert_allclose(remaining_targets(times), [3.0, 2.0, 1.0])


@pytest.mark.parametrize(
    "times, end_s, match",
    [
        (np.array([0.0]), None, "one frame"),
        (np.array([0.0, 2.0, 1.0]), None, "increasing"),
        (np.array([0.0, 1.0]), 0.5, "before its last frame"),
        (np.zeros(0), None, "non-empty"),
    ],
)
def test_targets_refuse_bad_input(times: np.ndarray, end_s: float | None, match: str) -> None:
    with pytest.raises(EvaluationError, match=match):
        remaining_targets(times, end_s=end_s)


def test_a_single_frame_with_an_explicit_end() -> None:
    np.testing.assert_allclose(remaining_targets(np.array([12.0]), end_s=72.0), [1.0])


# ---------------------------------------------------------------- scores


def loop_mae(pairs: list[tuple[float, float]]) -> float | None:
    return sum(abs(y - t) for y, t in pairs) / len(pairs) if pairs else None


def loop_rsd(predictions: dict[str, list[float]], targets: dict[str, list[float]]) -> dict:
    """Per video and pooled: every frame, and the frames whose target is at most 2 and 5 minutes."""
    keys = {"mae": math.inf, "mae_last_2min": 2.0, "mae_last_5min": 5.0}
    per_video = {}
    for video in targets:
        pairs = list(zip(predictions[video], targets[video], strict=True))
        per_video[video] = {
            k: loop_mae([(y, t) for y, t in pairs if t <= limit]) for k, limit in keys.items()
        }
    every = [(y, t) for v in targets for y, t in zip(predictions[v], targets[v], strict=True)]
    pooled = {k: loop_mae([(y, t) for y, t in every if t <= limit]) for k, limit in keys.items()}
    video_mean = {}
    for k in keys:
        defined = [per_video[v][k] for v in per_video if per_video[v][k] is not None]
        video_mean[k] = sum(defined) / len(defined) if defined else None
    return {"pooled": pooled, "video_mean": video_mean, "per_video": per_video}


def assert_close(got: float | None, want: float | None) -> None:
    assert (got is None) == (want is None), (got, want)
    if want is not None:
        assert got == pytest.approx(want, abs=1e-9)


def test_rsd_scores_by_hand() -> None:
    # Video a: 3 frames, targets 6, 4, 1 min; video b: 2 frames, targets 3, 0.5 min.
    targets = {"a": np.array([6.0, 4.0, 1.0]), "b": np.array([3.0, 0.5])}
    predictions = {"a": np.array([5.0, 4.0, 3.0]), "b": np.array([3.5, 0.5])}
    got = rsd_scores(predictions, targets)
    assert got["videos"] == 2
    assert got["per_video"]["a"] == {"mae": pytest.approx(1.0), "mae_last_2min": 2.0, "mae_last_5min": 1.0}
    assert got["per_video"]["b"] == {"mae": 0.25, "mae_last_2min": 0.0, "mae_last_5min": 0.25}
    assert got["pooled"] == {
        "mae": pytest.approx(3.5 / 5),
        "mae_last_2min": pytest.approx(1.0),  # frames a3, b2
        "mae_last_5min": pytest.approx(2.5 / 4),  # frames a2, a3, b1, b2
    }
    assert got["video_mean"] == {"mae": pytest.approx(0.625), "mae_last_2min": 1.0, "mae_last_5min": 0.625}


def test_a_video_without_last_minutes_frames_is_left_out_of_the_video_mean() -> None:
    got = rsd_scores(
        {"a": np.array([9.0]), "b": np.array([1.0])}, {"a": np.array([10.0]), "b": np.array([1.5])}
    )
    assert got["per_video"]["a"]["mae_last_5min"] is None
    assert got["video_mean"]["mae_last_5min"] == pytest.approx(0.5)
    assert got["video_mean"]["mae"] == pytest.approx(0.75)


def test_the_last_minutes_include_a_frame_exactly_that_far_from_the_end() -> None:
    got = rsd_scores(
        {"c": np.array([4.0, 2.5])}, {"c": remaining_targets(np.array([0.0, 180.0]), end_s=300.0)}
    )
    assert got["per_video"]["c"] == {"mae": 0.75, "mae_last_2min": 0.5, "mae_last_5min": 0.75}


@pytest.mark.parametrize("seed", range(15))
def test_rsd_scores_match_the_loop_on_random_videos(seed: int) -> None:
    rng = np.random.default_rng(seed)
    targets, predictions = {}, {}
    for v in range(int(rng.integers(1, 6))):
        steps = rng.choice([1.0, 1.0, 30.0, 120.0], size=int(rng.integers(1, 40)))
        times = np.cumsum(steps)
        target = remaining_targets(times, end_s=times[-1] + float(rng.choice([1.0, 400.0])))
        targets[f"v{v}"] = target
        predictions[f"v{v}"] = np.clip(target + rng.normal(0, 3, target.shape), 0, None)
    got = rsd_scores(predictions, targets)
    want = loop_rsd(
        {k: v.tolist() for k, v in predictions.items()}, {k: v.tolist() for k, v in targets.items()}
    )
    for block in ("pooled", "video_mean"):
        for key in want[block]:
            assert_close(got[block][key], want[block][key])
    for video, scores in want["per_video"].items():
        for key, value in scores.items():
            assert_close(got["per_video"][video][key], value)


def test_rsd_scores_refuse_mismatched_videos() -> None:
    with pytest.raises(EvaluationError, match="different videos"):
        rsd_scores({"a": np.zeros(2)}, {"b": np.zeros(2)})
    with pytest.raises(EvaluationError, match="one value per frame"):
        rsd_scores({"a": np.zeros(2)}, {"a": np.zeros(3)})


# ---------------------------------------------------------------- references


def test_naive_rsd_by_hand() -> None:
    np.testing.assert_allclose(naive_rsd(30.0, np.array([0.0, 10.0, 30.0, 45.0])), [30.0, 20.0, 0.0, 0.0])


def test_mean_target_at_elapsed_by_hand() -> None:
    # Bins of 0.1 min (6 s). Video 1 at 0, 6, 18 s; video 2 at 0, 6 s. Bin 2 (12-17 s) is empty: it takes
    # bin 1's mean; queries past the longest training video take the last bin's.
    targets = [np.array([3.0, 2.0, 1.0]), np.array([5.0, 4.0])]
    elapsed = [np.array([0, 6, 18]) / 60, np.array([0, 6]) / 60]
    query = np.array([0, 6, 12, 18, 24, 60, 3]) / 60
    got = mean_target_at_elapsed(targets, elapsed, query)
    np.testing.assert_allclose(got, [4.0, 3.0, 3.0, 1.0, 1.0, 1.0, 4.0])


def loop_mean_target(
    targets: list[np.ndarray], seconds: list[list[int]], query_s: list[int], bin_s: int
) -> list:
    """Integer seconds, bins of `bin_s` seconds; an empty bin walks back to the nearest filled one."""
    by_bin: dict[int, list] = {}
    for video_targets, video_seconds in zip(targets, seconds, strict=True):
        for row, s in zip(video_targets, video_seconds, strict=True):
            by_bin.setdefault(s // bin_s, []).append(row)
    out = []
    for s in query_s:
        k = s // bin_s
        while k not in by_bin and k > min(by_bin):
            k -= 1
        if k not in by_bin:
            k = min(by_bin)
        rows = by_bin[k]
        out.append(sum(rows) / len(rows))
    return out


@pytest.mark.parametrize("seed", range(15))
def test_mean_target_at_elapsed_matches_the_loop(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    bin_s = int(rng.choice([1, 6, 60]))
    classes = int(rng.integers(1, 4))
    seconds = [
        np.sort(rng.choice(np.arange(5, 400), size=int(rng.integers(1, 30)), replace=False)) for _ in range(3)
    ]
    targets = [rng.uniform(0, 5, size=(s.size, classes)) for s in seconds]
    query = rng.integers(0, 500, size=50)
    got = mean_target_at_elapsed(targets, [s / 60 for s in seconds], query / 60, bin_min=bin_s / 60)
    want = loop_mean_target(targets, [s.tolist() for s in seconds], query.tolist(), bin_s)
    np.testing.assert_allclose(got, np.array(want), rtol=1e-12)


def test_mean_target_at_elapsed_keeps_one_dimensional_targets() -> None:
    got = mean_target_at_elapsed([np.array([2.0, 1.0])], [np.array([0.0, 0.5])], np.array([0.0, 0.5, 0.7]))
    assert got.shape == (3,)
    np.testing.assert_allclose(got, [2.0, 1.0, 1.0])
