"""Training items: per-frame clip augmentation, jigsaw current vs neighbours, seeding by the spec alone."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from plstitch_eval.errors import TrainingError
from plstitch_train.data import FrameStore, TrainDataset, build_training_data, open_frame_store
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


def _numbered_video(length: int = 12) -> np.ndarray:
    """Frame t is a flat image of grey level 20 * t (+ a coloured corner): its index can be read back."""
    frames = np.zeros((length, 40, 56, 3), dtype=np.uint8)
    for t in range(length):
        frames[t] = 20 * t
        frames[t, :8, :8] = (255, 0, 0)
    return frames


def _reversal_stores(frames: np.ndarray, reverse_time: bool, tmp_path) -> list:
    """The same video in both store kinds: decoded frames (`FrameStore`) and an authors'-layout LMDB read
    through `open_frame_store` as training does (the config's reverse_time decides)."""
    from tests.train.test_frames_lmdb import authors_lmdb

    authors_lmdb(tmp_path / "db", {"v": dict(enumerate(frames))})
    config = get_preset("tiny-cpu").replace(data=str(tmp_path / "db"), fps=1.0, reverse_time=reverse_time)
    lmdb_store = open_frame_store(config, tmp_path / "cache")
    return [FrameStore(["v"], [frames], fps=1.0, reverse_time=reverse_time), lmdb_store]


@pytest.mark.parametrize("reverse_time", [True, False])
def test_time_reversal_reverses_the_jigsaw_neighbours_with_the_clip(reverse_time: bool, tmp_path) -> None:
    """Time-reversed training (procedural-awareness experiment): the clip's first frame and the jigsaw's
    "past" neighbour are both the LATER frames of the original video, "future" the earlier one; forward
    training keeps the original order. Each item part equals the augmentation of the original frames picked
    here by hand (position p of a reversed video of length L is original frame L - 1 - p).
    """
    frames = _numbered_video()
    last = len(frames) - 1
    spec = SampleSpec(video=0, clip=(0, 3, 6, 9), past=2, current=5, future=8, seed=7)

    def original(position: int) -> int:
        return last - position if reverse_time else position

    for store in _reversal_stores(frames, reverse_time, tmp_path):
        dataset = _dataset(store, need_mim=False)
        item = dataset[spec]
        clip_frames = [original(p) for p in spec.clip]
        past, current, future = (original(p) for p in (spec.past, spec.current, spec.future))
        if reverse_time:
            assert clip_frames == [11, 8, 5, 2] and (past, current, future) == (9, 6, 3)
        else:
            assert clip_frames == [0, 3, 6, 9] and (past, current, future) == (2, 5, 8)
        # the neighbours (plain resize) still show their grey level: read the original frame index back
        mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
        std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
        grey = ((item["context"][:, :, 16:, 16:] * std + mean) * 255).mean(dim=(1, 2, 3))
        assert round(float(grey[0]) / 20) == past and round(float(grey[2]) / 20) == future, grey
        # the jigsaw's time direction is the clip's: past precedes current as clip frame 0 precedes frame 1
        assert (past > current > future) == (clip_frames[0] > clip_frames[1]) == reverse_time
        chw = torch.from_numpy(frames).permute(0, 3, 1, 2)
        assert torch.equal(item["clip"], dataset.augment.clip(chw[clip_frames], spec.seed))
        assert torch.equal(item["context"], dataset.augment.context(chw[[past, current, future]], spec.seed))
