"""Training sampler: every training frame once per epoch as the image-branch `current`, plus a paired clip.

An epoch is the image branch's frame list (every frame decoded at the training fps, once, shuffled), as in the
authors' code, where an epoch is one pass of the image loader. The video branch's clip list (`clips_per_video`
clips per video, start first then step, resampled every epoch) is repeated until it is as long as the epoch,
shuffled and paired item by item with the frames; the clip therefore usually comes from another video than the
frame, exactly as with the authors' two independent loaders.

Everything of an epoch is drawn from `numpy.random.default_rng([seed, epoch])`, so an epoch's plan depends
only on (seed, epoch) - not on workers, ranks or how far a previous run got - and a resumed run that
restarts at `(epoch, batch)` sees exactly the batches the uninterrupted run would have seen.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import logger

if TYPE_CHECKING:
    from plstitch_train.config import SamplingConfig

_EPS = 1e-9


@dataclass(frozen=True)
class SampleSpec:
    """One training item: a frame triplet of `video`, a clip of `clip_video` and an augmentation seed.

    `clip_video=None` means the clip comes from `video` (hand-built items in tests and tools).
    """

    video: int
    clip: tuple[int, ...]
    past: int
    current: int
    future: int
    seed: int
    clip_video: int | None = None

    @property
    def clip_source(self) -> int:
        """The video the clip frames are read from."""
        return self.video if self.clip_video is None else self.clip_video


def clips_per_video(
    num_frames: int, bounds: Sequence[int] = (240, 960), counts: Sequence[int] = (60, 200, 300)
) -> int:
    """Clips per video per epoch: counts[0] below bounds[0] frames, counts[1] below bounds[1], else counts[2].

    The authors' `lo <= n < hi` rule, so a video of exactly 960 frames already gets 300 clips.
    """
    if num_frames < bounds[0]:
        return int(counts[0])
    if num_frames < bounds[1]:
        return int(counts[1])
    return int(counts[2])


def sample_clips(
    rng: np.random.Generator, num_frames: int, clip_len: int, min_step: int, max_step: int, count: int
) -> np.ndarray:
    """`count` clips [count, k]: start first, uniform over the starts that hold a clip with `min_step`; then
    the step, uniform in [min_step, min(max_step, (T-1-start)//(k-1))] (authors' `Temporal_RandStep_dataset`).

    Why start first: every start is equally likely, so clip starts cover the whole video evenly, and short
    steps are more frequent than long ones (only early starts leave room for long steps).
    """
    if clip_len < 2:
        raise ConfigError(f"A clip needs at least 2 frames (got clip_len={clip_len}).")
    max_start = num_frames - 1 - min_step * (clip_len - 1)
    if max_start < 0:
        raise ConfigError(
            f"A video with {num_frames} frames cannot hold a clip of {clip_len} frames with step {min_step}."
        )
    starts = rng.integers(0, max_start + 1, size=count)
    highest = np.minimum(max_step, (num_frames - 1 - starts) // (clip_len - 1))
    steps = rng.integers(min_step, highest + 1)
    return starts[:, None] + steps[:, None] * np.arange(clip_len)


def sample_clip(
    rng: np.random.Generator, num_frames: int, clip_len: int, min_step: int, max_step: int
) -> np.ndarray:
    """One clip `t0 + dt * arange(k)` (0-based frame indices), drawn as in `sample_clips`."""
    return sample_clips(rng, num_frames, clip_len, min_step, max_step, 1)[0]


def context_offsets(fps: float, context_seconds: Sequence[float]) -> tuple[int, int]:
    """Smallest and largest context offset in frames: the whole frame counts inside `context_seconds` * fps.

    At least 1 frame; a range that holds no whole frame count uses the one nearest its middle. The paper's
    [1.5, 2.5] s at 1 fps gives (2, 2); the authors' LMDB code is (1, 3) frames at 1 fps.
    """
    low, high = (float(s) * fps for s in context_seconds)
    first, last = math.ceil(low - _EPS), math.floor(high + _EPS)
    if first > last:
        first = last = round((low + high) / 2)
    first = max(1, first)
    return first, max(first, last)


def sample_context(
    rng: np.random.Generator,
    currents: np.ndarray,
    num_frames: np.ndarray,
    offsets: tuple[int, int],
) -> tuple[np.ndarray, np.ndarray]:
    """Past and future frames of each current frame: an offset uniform over the offsets in `offsets` that stay
    inside the video (authors' rule), or the current frame itself when none does.
    """
    currents = np.asarray(currents, dtype=np.int64)
    num_frames = np.asarray(num_frames, dtype=np.int64)
    first, last = offsets
    sides = []
    for room in (currents, num_frames - 1 - currents):  # frames available before / after
        highest = np.minimum(last, room)
        fits = highest >= first
        drawn = rng.integers(first, np.maximum(highest, first) + 1)
        sides.append(np.where(fits, drawn, 0))
    return currents - sides[0], currents + sides[1]


@dataclass(frozen=True)
class _EpochPlan:
    """One epoch as arrays (item i: frame, context, clip index, seed); `spec(i)` builds a `SampleSpec`."""

    videos: np.ndarray
    currents: np.ndarray
    pasts: np.ndarray
    futures: np.ndarray
    seeds: np.ndarray
    clip_index: np.ndarray
    clip_videos: np.ndarray
    clips: np.ndarray  # [n_clips, k]

    def spec(self, i: int) -> SampleSpec:
        c = int(self.clip_index[i])
        return SampleSpec(
            video=int(self.videos[i]),
            clip=tuple(int(t) for t in self.clips[c]),
            past=int(self.pasts[i]),
            current=int(self.currents[i]),
            future=int(self.futures[i]),
            seed=int(self.seeds[i]),
            clip_video=int(self.clip_videos[c]),
        )


class TrainSampler:
    """Batch sampler of `SampleSpec` lists for one rank: DistributedSampler-style sharding and a resume point.

    Epoch plan: one item per training frame (that frame is the item's `current`), shuffled; the clip list is
    tiled to the same length and paired item by item. The plan is cut to a multiple of
    `world_size * batch_size` (drop last) and rank r takes items r, r+W, ... - so the union of the ranks'
    batch i equals a single process's batch i at the same global batch.
    """

    def __init__(
        self,
        video_lengths: Sequence[int],
        *,
        batch_size: int,
        clip_len: int,
        min_step: int = 1,
        max_step: int = 20,
        fps: float = 1.0,
        context_seconds: Sequence[float] = (1.5, 2.5),
        length_bounds: Sequence[int] = (240, 960),
        counts: Sequence[int] = (60, 200, 300),
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        short = [i for i, n in enumerate(video_lengths) if n < clip_len]
        if short:
            raise ConfigError(
                f"Videos {short} have fewer than clip_len={clip_len} frames; drop them or lower --clip-len."
            )
        if not 0 <= rank < world_size:
            raise ConfigError(f"rank {rank} outside world size {world_size}.")
        if not 1 <= min_step <= max_step:
            raise ConfigError(f"need 1 <= min_step <= max_step (got {min_step}, {max_step}).")
        self.video_lengths = [int(n) for n in video_lengths]
        self.batch_size = batch_size
        self.clip_len, self.min_step, self.max_step = clip_len, min_step, max_step
        self.fps, self.context_seconds = fps, tuple(context_seconds)
        self.offsets = context_offsets(fps, self.context_seconds)
        self.length_bounds, self.counts = tuple(length_bounds), tuple(counts)
        self.seed, self.rank, self.world_size = seed, rank, world_size
        span = min_step * (clip_len - 1) + 1
        self.clip_videos = [i for i, n in enumerate(self.video_lengths) if n >= span]
        if not self.clip_videos:
            raise ConfigError(f"No video holds a clip of {clip_len} frames with step {min_step}.")
        if len(self.clip_videos) < len(self.video_lengths):
            logger.warning(
                "%d videos are shorter than a clip with step %d (%d frames): used by the image branch only.",
                len(self.video_lengths) - len(self.clip_videos),
                min_step,
                span,
            )
        self.epoch = 0
        self.start_batch = 0
        if self.batches_per_epoch == 0:
            raise ConfigError(
                f"An epoch has {self.items_per_epoch} items, fewer than one global batch of "
                f"{batch_size * world_size}; lower --batch-size or add videos."
            )

    @classmethod
    def from_settings(
        cls,
        sampling: SamplingConfig,
        video_lengths: Sequence[int],
        *,
        batch_size: int,
        fps: float,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> TrainSampler:
        """The sampler of a run's `sampling` section; `batch_size` is this rank's micro-batch."""
        return cls(
            video_lengths,
            batch_size=batch_size,
            clip_len=sampling.clip_len,
            min_step=sampling.min_step,
            max_step=sampling.max_step,
            fps=fps,
            context_seconds=sampling.context_seconds,
            length_bounds=sampling.clip_length_bounds,
            counts=sampling.clips_per_video,
            seed=seed,
            rank=rank,
            world_size=world_size,
        )

    @property
    def items_per_epoch(self) -> int:
        """Items in one epoch's plan (every training frame once), before dropping the last partial batch."""
        return sum(self.video_lengths)

    @property
    def clips_per_epoch(self) -> int:
        """Distinct clips drawn per epoch (before tiling them to `items_per_epoch`)."""
        return sum(
            clips_per_video(self.video_lengths[v], self.length_bounds, self.counts) for v in self.clip_videos
        )

    @property
    def batches_per_epoch(self) -> int:
        """Batches each rank yields per epoch."""
        return self.items_per_epoch // (self.batch_size * self.world_size)

    def _plan(self, epoch: int) -> _EpochPlan:
        """The epoch's items as arrays; a pure function of (seed, epoch)."""
        rng = np.random.default_rng([self.seed, epoch])
        lengths = np.asarray(self.video_lengths, dtype=np.int64)
        clips, clip_videos = [], []
        for video in self.clip_videos:
            count = clips_per_video(int(lengths[video]), self.length_bounds, self.counts)
            clips.append(
                sample_clips(rng, int(lengths[video]), self.clip_len, self.min_step, self.max_step, count)
            )
            clip_videos.append(np.full(count, video, dtype=np.int64))
        n_items, n_clips = int(lengths.sum()), sum(len(c) for c in clips)
        order = rng.permutation(n_items)  # every frame once, shuffled
        videos = np.repeat(np.arange(len(lengths)), lengths)[order]
        firsts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        currents = order - firsts[videos]
        repeats = -(-n_items // n_clips)  # the clip list repeated to cover the epoch, then shuffled
        clip_index = rng.permutation(n_clips * repeats)[:n_items] % n_clips
        pasts, futures = sample_context(rng, currents, lengths[videos], self.offsets)
        seeds = rng.integers(0, 2**62, size=n_items)
        clip_videos_all, clips_all = np.concatenate(clip_videos), np.concatenate(clips)
        return _EpochPlan(videos, currents, pasts, futures, seeds, clip_index, clip_videos_all, clips_all)

    def epoch_plan(self, epoch: int) -> list[SampleSpec]:
        """All items of `epoch` (every rank's), shuffled; a pure function of (seed, epoch)."""
        plan = self._plan(epoch)
        return [plan.spec(i) for i in range(len(plan.videos))]

    def _rank_positions(self) -> range:
        """Plan positions of this rank's items: rank, rank+W, ... within the whole global batches."""
        usable = self.batches_per_epoch * self.batch_size * self.world_size
        return range(self.rank, usable, self.world_size)

    def rank_items(self, epoch: int) -> list[SampleSpec]:
        """This rank's share of the epoch: items rank, rank+W, ... of the plan cut to whole global batches."""
        plan = self._plan(epoch)
        return [plan.spec(i) for i in self._rank_positions()]

    def set_position(self, epoch: int, batch: int = 0) -> None:
        """Start the next iteration at batch `batch` of `epoch` (resume point)."""
        self.epoch, self.start_batch = int(epoch), int(batch)

    def state_dict(self) -> dict[str, int]:
        """The resume point (plain ints)."""
        return {"epoch": self.epoch, "batch": self.start_batch, "seed": self.seed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Restore a resume point saved by `state_dict`."""
        if int(state.get("seed", self.seed)) != self.seed:
            raise ConfigError(
                f"Sampler seed {state['seed']} in the checkpoint differs from the run's {self.seed}."
            )
        self.set_position(state["epoch"], state["batch"])

    def __len__(self) -> int:
        return self.batches_per_epoch - self.start_batch

    def __iter__(self) -> Iterator[list[SampleSpec]]:
        plan = self._plan(self.epoch)
        positions = self._rank_positions()
        for batch in range(self.start_batch, self.batches_per_epoch):
            chunk = positions[batch * self.batch_size : (batch + 1) * self.batch_size]
            yield [plan.spec(i) for i in chunk]
