"""Training sampler: clip rule (start first), context offsets, every frame once per epoch, sharding."""

from __future__ import annotations

import collections
import logging
import math

import numpy as np
import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train.sampling import (
    TrainSampler,
    clips_per_video,
    context_offsets,
    sample_clip,
    sample_clips,
    sample_context,
)

LENGTHS = [30, 250, 1000, 12]


def _sampler(**kwargs: object) -> TrainSampler:
    args = dict(
        batch_size=4,
        clip_len=8,
        min_step=1,
        max_step=20,
        fps=2.0,
        context_seconds=(1.5, 2.5),
        counts=(5, 7, 9),
        seed=3,
    )
    args.update(kwargs)
    return TrainSampler(LENGTHS, **args)


def _authors_clip_probabilities(num_frames: int, k: int, min_step: int, max_step: int) -> dict:
    """Exact P(start, step) of the authors' rule: start uniform over the starts that fit a clip with
    min_step, then the step uniform in [min_step, min(max_step, what still fits from that start)]."""
    starts = range(0, num_frames - 1 - min_step * (k - 1) + 1)
    probs = {}
    for start in starts:
        highest = min(max_step, (num_frames - 1 - start) // (k - 1))
        for step in range(min_step, highest + 1):
            probs[(start, step)] = 1 / len(starts) / (highest - min_step + 1)
    return probs


@pytest.mark.parametrize(
    ("frames", "count"),
    [(1, 60), (239, 60), (240, 200), (959, 200), (960, 300), (961, 300), (5000, 300)],
)
def test_clips_per_video_follows_the_authors_length_rule(frames: int, count: int) -> None:
    assert clips_per_video(frames) == count  # authors: lo <= n < hi, so 960 frames already give 300


@pytest.mark.parametrize("num_frames", [8, 9, 30, 150, 2000])
def test_clip_has_one_step_in_range_and_stays_inside_the_video(num_frames: int) -> None:
    rng = np.random.default_rng(0)
    steps = set()
    for _ in range(400):
        clip = sample_clip(rng, num_frames, 8, 1, 20)
        diffs = np.diff(clip)
        assert len(clip) == 8 and clip[0] >= 0 and clip[-1] <= num_frames - 1
        assert len(set(diffs.tolist())) == 1  # a single step dt
        steps.add(int(diffs[0]))
    assert max(steps) <= min(20, (num_frames - 1) // 7) and min(steps) >= 1


@pytest.mark.parametrize(("num_frames", "min_step", "max_step"), [(30, 1, 20), (60, 2, 5)])
def test_clip_start_then_step_matches_the_authors_distribution(
    num_frames: int, min_step: int, max_step: int
) -> None:
    """Empirical joint law of (start, step) is within sampling noise of the exact start-first law."""
    rng = np.random.default_rng(4)
    clips = sample_clips(rng, num_frames, 8, min_step, max_step, 60_000)
    drawn = collections.Counter(zip(clips[:, 0].tolist(), (clips[:, 1] - clips[:, 0]).tolist(), strict=True))
    exact = _authors_clip_probabilities(num_frames, 8, min_step, max_step)
    assert set(drawn) <= set(exact)  # never a (start, step) the rule forbids
    total_variation = 0.5 * sum(abs(drawn[key] / len(clips) - p) for key, p in exact.items())
    assert total_variation < 0.03
    # the start alone is uniform over every start that holds a clip with min_step
    starts = np.bincount(clips[:, 0], minlength=num_frames - min_step * 7)
    expected = len(clips) / (num_frames - min_step * 7)
    assert len(starts) == num_frames - min_step * 7
    assert np.all(np.abs(starts - expected) < 5 * math.sqrt(expected))


def test_clip_step_given_the_start_is_uniform_up_to_what_fits() -> None:
    rng = np.random.default_rng(5)
    clips = sample_clips(rng, 30, 8, 1, 20, 40_000)
    steps = clips[:, 1] - clips[:, 0]
    for start in (0, 5, 12, 22):
        given = steps[clips[:, 0] == start]
        highest = min(20, (29 - start) // 7)
        counts = np.bincount(given, minlength=highest + 1)[1:]
        assert len(counts) == highest  # exactly the steps 1..highest occur
        assert counts.min() > 0.7 * len(given) / highest


def test_a_video_that_cannot_hold_a_clip_with_min_step_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot hold a clip"):
        sample_clip(np.random.default_rng(0), 14, 8, 2, 4)  # needs 1 + 2*7 = 15 frames


@pytest.mark.parametrize(
    ("fps", "seconds", "offsets"),
    [
        (1.0, (1.5, 2.5), (2, 2)),
        (1.0, (1.0, 3.0), (1, 3)),
        (2.0, (0.5, 1.5), (1, 3)),
        (1.0, (0.1, 0.2), (1, 1)),
    ],
)
def test_context_offsets_are_the_whole_frame_counts_in_range(fps, seconds, offsets) -> None:
    assert context_offsets(fps, seconds) == offsets


def test_context_frames_use_an_offset_that_fits_else_the_current_frame() -> None:
    rng = np.random.default_rng(2)
    num_frames = 20
    currents = np.repeat(np.arange(num_frames), 400)
    pasts, futures = sample_context(rng, currents, np.full(len(currents), num_frames), (2, 4))
    for current in range(num_frames):
        past = set((current - pasts[currents == current]).tolist())
        future = set((futures[currents == current] - current).tolist())
        # authors' rule: uniform over the offsets still inside the video; none fits -> the current frame
        assert past == ({d for d in (2, 3, 4) if current - d >= 0} or {0})
        assert future == ({d for d in (2, 3, 4) if current + d <= num_frames - 1} or {0})


def test_every_training_frame_is_current_exactly_once_per_epoch() -> None:
    sampler = _sampler()
    for epoch in (0, 1):
        plan = sampler.epoch_plan(epoch)
        assert len(plan) == sampler.items_per_epoch == sum(LENGTHS)
        seen = collections.Counter((item.video, item.current) for item in plan)
        assert seen == {(v, t): 1 for v, n in enumerate(LENGTHS) for t in range(n)}
        order = [(item.video, item.current) for item in plan]
        assert order != sorted(order)  # shuffled


def test_clip_list_is_tiled_to_the_epoch_length() -> None:
    sampler = _sampler()
    plan = sampler.epoch_plan(0)
    per_video = [clips_per_video(n, (240, 960), (5, 7, 9)) for n in LENGTHS]
    assert sampler.clips_per_epoch == sum(per_video) == 26
    assert all(item.clip is not None and len(item.clip) == 8 for item in plan)  # one clip per item
    distinct = {(item.clip_video, item.clip) for item in plan}
    assert len(distinct) <= 26
    # each video's share of the tiled list follows its clip count (repeats = ceil(1292 / 26) = 50)
    shares = collections.Counter(item.clip_video for item in plan)
    for video, count in enumerate(per_video):
        assert abs(shares[video] - len(plan) * count / 26) < 0.2 * len(plan) * count / 26
        for item in plan:
            if item.clip_video == video:
                assert item.clip[-1] <= LENGTHS[video] - 1
    assert sum(item.clip_video != item.video for item in plan) > len(plan) / 2  # independent of the frame


def test_epoch_plan_depends_only_on_seed_and_epoch() -> None:
    sampler = _sampler()
    plan = sampler.epoch_plan(1)
    other = _sampler(batch_size=2, rank=1, world_size=2)
    other.set_position(3, 5)
    list(other)  # iterating another epoch first changes nothing
    assert other.epoch_plan(1) == plan
    assert sampler.epoch_plan(0) != plan  # resampled every epoch
    assert _sampler(seed=4).epoch_plan(1) != plan
    assert {item.clip for item in sampler.epoch_plan(0)} != {item.clip for item in plan}  # new clips


def test_sharding_is_disjoint_and_matches_a_single_process_batch() -> None:
    single = _sampler(batch_size=4)
    ranks = [_sampler(batch_size=2, rank=r, world_size=2) for r in range(2)]
    assert single.batches_per_epoch == ranks[0].batches_per_epoch == sum(LENGTHS) // 4
    single_batches = list(single)
    rank_batches = [list(r) for r in ranks]
    assert rank_batches[0] == [
        ranks[0].rank_items(0)[i : i + 2] for i in range(0, 2 * len(single_batches), 2)
    ]
    seen: set[int] = set()
    for i, batch in enumerate(single_batches):
        union = rank_batches[0][i] + rank_batches[1][i]
        assert set(union) == set(batch) and len(union) == 4
        ids = {item.seed for item in union}
        assert not ids & seen and len(ids) == 4  # disjoint across ranks and batches
        seen |= ids


def test_resume_position_continues_the_same_epoch() -> None:
    sampler = _sampler()
    sampler.set_position(2, 0)
    full = list(sampler)
    resumed = _sampler()
    resumed.load_state_dict({"epoch": 2, "batch": 3, "seed": 3})
    assert len(resumed) == len(full) - 3
    assert list(resumed) == full[3:]
    assert resumed.state_dict() == {"epoch": 2, "batch": 3, "seed": 3}


def test_too_short_video_and_too_large_batch_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="fewer than clip_len"):
        TrainSampler([3, 50], batch_size=1, clip_len=8)
    with pytest.raises(ConfigError, match="fewer than one global batch"):
        TrainSampler([10], batch_size=8, clip_len=4, counts=(2, 2, 2), world_size=2)


def test_a_video_too_short_for_min_step_feeds_only_the_image_branch(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        sampler = TrainSampler([10, 40], batch_size=2, clip_len=4, min_step=4, max_step=6, counts=(3, 3, 3))
    assert "image branch only" in caplog.text
    plan = sampler.epoch_plan(0)
    assert {item.clip_video for item in plan} == {1}
    assert {item.video for item in plan} == {0, 1}
