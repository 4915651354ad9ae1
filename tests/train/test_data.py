"""Training items: per-frame clip augmentation, jigsaw current vs neighbours, seeding by the spec alone."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from plstitch_eval.errors import TrainingError
from plstitch_train.data import FrameStore, TrainDataset, build_training_data
from plstitch_train.presets import get_preset
from plstitch_train.sampling import SampleSpec
from plstitch_train.transforms import AugmentationSettings
from tests.train.test_transforms import _is_plain_resize

SIZE, GRID = 32, (4, 4)


def _store() -> FrameStore:
    """Video 0: one textured frame repeated 12 times (content never changes); video 1: 12 different frames."""
    rng = np.random.default_rng(0)
    still = np.repeat(rng.integers(0, 256, (1, 40, 56, 3), dtype=np.uint8), 12, axis=0)
    moving = rng.integers(0, 256, (12, 40, 56, 3), dtype=np.uint8)
    return FrameStore(["still", "moving"], [still, moving], fps=1.0)


def _dataset(store: FrameStore | None = None, **kwargs) -> TrainDataset:
    return TrainDataset(store or _store(), SIZE, GRID, 0.3, **kwargs)


def _spec(seed: int, **changes) -> SampleSpec:
    spec = dict(video=0, clip=(0, 3, 6, 9), past=2, current=5, future=8, seed=seed)
    return SampleSpec(**{**spec, **changes})


def test_clip_frames_get_their_own_augmentation_draws() -> None:
    """The clip frames show the same content, so any difference between them is the augmentation's."""
    dataset = _dataset(need_mim=False, need_jigsaw=False)
    identical_pairs = pairs = 0
    for seed in range(10):
        clip = dataset[_spec(seed)]["clip"]
        assert clip.shape == (4, 3, SIZE, SIZE)
        same = [torch.equal(clip[i], clip[j]) for i, j in itertools.combinations(range(4), 2)]
        assert not all(same)  # a shared draw would make every frame identical
        identical_pairs, pairs = identical_pairs + sum(same), pairs + len(same)
    assert identical_pairs / pairs < 0.25  # only when neither frame was recoloured (0.2 * 0.8 * 0.9 each)


def test_the_same_seed_reproduces_the_item_exactly() -> None:
    dataset = _dataset()
    torch.manual_seed(1)
    first = dataset[_spec(11)]
    torch.manual_seed(2)
    state = torch.get_rng_state()
    second = dataset[_spec(11)]
    assert torch.equal(state, torch.get_rng_state())  # the global RNG is untouched
    assert first.keys() == {"clip", "crops", "context", "masks"}
    for key in first:
        assert torch.equal(first[key], second[key]), key
    other = dataset[_spec(12)]
    assert not any(torch.equal(first[key], other[key]) for key in ("clip", "crops", "context"))


def test_each_part_depends_only_on_the_seed_not_on_the_other_branches() -> None:
    full = _dataset()[_spec(5)]
    assert torch.equal(_dataset(need_mim=False, need_jigsaw=False)[_spec(5)]["clip"], full["clip"])
    assert torch.equal(_dataset(need_clip=False, need_mim=False)[_spec(5)]["context"], full["context"])


def test_clip_is_read_from_the_clip_video() -> None:
    store = _store()
    dataset = _dataset(store, need_mim=False, need_jigsaw=False)
    from_other = dataset[_spec(3, video=0, clip_video=1)]["clip"]
    assert torch.equal(from_other, dataset[_spec(3, video=1)]["clip"])
    assert not torch.equal(from_other, dataset[_spec(3, video=0)]["clip"])


def test_jigsaw_neighbours_are_resized_and_the_current_frame_cropped() -> None:
    """Default (issue 13, REFERENCE): past/future equal a plain resize of their source frames."""
    store = _store()
    dataset = _dataset(store, need_clip=False, need_mim=False)
    frames = torch.from_numpy(store.frames(1, [2, 5, 8])).permute(0, 3, 1, 2)
    for seed in range(5):
        context = dataset[_spec(seed, video=1)]["context"]
        assert _is_plain_resize(context[0], frames[0]) and _is_plain_resize(context[2], frames[2])
        assert not _is_plain_resize(context[1], frames[1])


def test_jigsaw_neighbours_follow_the_authors_colour_draws_on_request() -> None:
    """neighbour_colour=True (authors' loader): resized, jitter p=0.3, grayscale p=0.2, own draws."""
    store = _store()
    dataset = _dataset(
        store,
        need_clip=False,
        need_mim=False,
        augmentation=AugmentationSettings(SIZE, neighbour_colour=True),
    )
    frames = torch.from_numpy(store.frames(1, [2, 5, 8])).permute(0, 3, 1, 2)
    untouched = 0
    for seed in range(150):
        context = dataset[_spec(seed, video=1)]["context"]
        untouched += _is_plain_resize(context[0], frames[0]) + _is_plain_resize(context[2], frames[2])
        assert not _is_plain_resize(context[1], frames[1])
    assert 0.45 < untouched / 300 < 0.67


def test_build_training_data_reads_every_data_setting_of_the_config() -> None:
    config = get_preset("tiny-cpu").replace(
        clip_len=3,
        min_step=2,
        max_step=3,
        clip_length_bounds=(5, 10),
        clips_per_video=(1, 2, 3),
        context_seconds=(1.0, 2.0),
        fps=1.0,
        batch_size=4,
        accum_steps=2,
        seed=7,
        img_size=SIZE,
        lambda_jigsaw=0.0,
        jigsaw_neighbour_colour=True,
    )
    dataset, sampler = build_training_data(config, _store(), GRID, rank=1, world_size=2)
    assert sampler.batch_size == 1  # 4 / (2 processes x 2 accumulation steps)
    assert (sampler.clip_len, sampler.min_step, sampler.max_step) == (3, 2, 3)
    assert (sampler.length_bounds, sampler.counts) == ((5, 10), (1, 2, 3))
    assert (sampler.context_seconds, sampler.fps, sampler.seed) == ((1.0, 2.0), 1.0, 7)
    assert (sampler.rank, sampler.world_size) == (1, 2)
    assert dataset.need_clip and dataset.need_mim and not dataset.need_jigsaw and dataset.grid == GRID
    with pytest.raises(TrainingError, match="batch_size 4 must be a multiple of processes \\(3\\)"):
        build_training_data(config, _store(), GRID, world_size=3)
