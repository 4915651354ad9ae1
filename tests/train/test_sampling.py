"""Clip and triplet samplers: bounds, one step per clip, counts, determinism, resampling, sharding, resume."""

from __future__ import annotations

import numpy as np
import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train.sampling import TrainSampler, clips_per_video, sample_clip, sample_triplet

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


@pytest.mark.parametrize(
    ("frames", "count"), [(1, 60), (239, 60), (240, 200), (960, 200), (961, 300), (5000, 300)]
)
def test_clips_per_video_follows_the_length_rule(frames: int, count: int) -> None:
    assert clips_per_video(frames) == count


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
    largest = min(20, (num_frames - 1) // 7)
    assert steps == set(range(1, largest + 1))  # every allowed step is drawn, none outside


def test_clip_starts_cover_the_whole_video() -> None:
    rng = np.random.default_rng(1)
    starts = {int(sample_clip(rng, 12, 4, 1, 1)[0]) for _ in range(500)}
    assert starts == set(range(0, 12 - 3))


def test_triplet_offsets_follow_the_context_seconds() -> None:
    rng = np.random.default_rng(2)
    fps, low, high = 4.0, 1.5, 2.5
    for _ in range(300):
        past, current, future = sample_triplet(rng, 200, fps, (low, high))
        for offset in (current - past, future - current):
            assert round(low * fps) <= offset <= round(high * fps)
        assert 0 <= past < current < future <= 199


def test_triplet_is_clamped_in_a_short_video() -> None:
    rng = np.random.default_rng(3)
    for _ in range(100):
        past, current, future = sample_triplet(rng, 5, 10.0, (1.5, 2.5))
        assert 0 <= past <= current <= future <= 4


def test_epoch_plan_counts_and_determinism() -> None:
    sampler = _sampler()
    plan = sampler.epoch_plan(0)
    per_video = np.bincount([item.video for item in plan], minlength=len(LENGTHS))
    assert per_video.tolist() == [5, 7, 9, 5]
    assert plan == _sampler().epoch_plan(0)  # same (seed, epoch) -> same plan
    assert plan != sampler.epoch_plan(1)  # resampled every epoch
    assert plan != _sampler(seed=4).epoch_plan(0)
    for item in plan:
        assert item.clip[-1] <= LENGTHS[item.video] - 1


def test_sharding_is_disjoint_and_matches_a_single_process_batch() -> None:
    single = _sampler(batch_size=4)
    ranks = [_sampler(batch_size=2, rank=r, world_size=2) for r in range(2)]
    assert single.batches_per_epoch == ranks[0].batches_per_epoch == 26 // 4
    single_batches = list(single)
    rank_batches = [list(r) for r in ranks]
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
        TrainSampler([50], batch_size=8, clip_len=4, counts=(2, 2, 2), world_size=2)
