"""Training sampler: a clip (k frames, one random step) plus a context triplet per item, resampled per epoch.

Each item of an epoch is a `SampleSpec` drawn from `numpy.random.default_rng([seed, epoch])`, so an epoch's
plan depends only on (seed, epoch) - not on workers, ranks or how far a previous run got - and a resumed run
that restarts at `(epoch, batch)` sees exactly the batches the uninterrupted run would have seen.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from plstitch_eval.errors import ConfigError


@dataclass(frozen=True)
class SampleSpec:
    """One training item: clip frame indices, the (past, current, future) triplet and an augmentation seed."""

    video: int
    clip: tuple[int, ...]
    past: int
    current: int
    future: int
    seed: int


def clips_per_video(
    num_frames: int, bounds: Sequence[int] = (240, 960), counts: Sequence[int] = (60, 200, 300)
) -> int:
    """Clips per video per epoch: counts[0] below bounds[0] frames, counts[2] above bounds[1], else [1]."""
    if num_frames < bounds[0]:
        return int(counts[0])
    if num_frames > bounds[1]:
        return int(counts[2])
    return int(counts[1])


def sample_clip(
    rng: np.random.Generator, num_frames: int, clip_len: int, min_step: int, max_step: int
) -> np.ndarray:
    """`t0 + dt * arange(k)` with dt uniform in [min_step, max_step] and t0 + (k-1)dt <= T-1 (0-based).

    The step is capped at (T-1)//(k-1) so any video with at least k frames yields a clip.
    """
    if num_frames < clip_len:
        raise ConfigError(f"A video with {num_frames} frames cannot hold a clip of {clip_len} frames.")
    max_fit = (num_frames - 1) // (clip_len - 1)
    high = min(max_step, max_fit)
    low = min(min_step, high)
    step = int(rng.integers(low, high + 1))
    start = int(rng.integers(0, num_frames - (clip_len - 1) * step))
    return start + step * np.arange(clip_len)


def sample_triplet(
    rng: np.random.Generator, num_frames: int, fps: float, context_seconds: Sequence[float]
) -> tuple[int, int, int]:
    """(past, current, future) frame indices; offsets tau1, tau2 uniform in `context_seconds` (>= 1 frame).

    The current frame is drawn so both context frames fit; on a video too short for that they are clamped.
    """
    low, high = context_seconds
    past_off, future_off = (max(1, round(float(tau) * fps)) for tau in rng.uniform(low, high, size=2))
    first, last = past_off, num_frames - 1 - future_off
    current = int(rng.integers(first, last + 1)) if first <= last else int(rng.integers(0, num_frames))
    return max(0, current - past_off), current, min(num_frames - 1, current + future_off)


class TrainSampler:
    """Batch sampler of `SampleSpec` lists for one rank: DistributedSampler-style sharding and a resume point.

    Epoch plan: every video contributes `clips_per_video(T)` items; the plan is shuffled, cut to a multiple of
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
        self.video_lengths = [int(n) for n in video_lengths]
        self.batch_size = batch_size
        self.clip_len, self.min_step, self.max_step = clip_len, min_step, max_step
        self.fps, self.context_seconds = fps, tuple(context_seconds)
        self.length_bounds, self.counts = tuple(length_bounds), tuple(counts)
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self.epoch = 0
        self.start_batch = 0
        if self.batches_per_epoch == 0:
            raise ConfigError(
                f"An epoch has {self.items_per_epoch} items, fewer than one global batch of "
                f"{batch_size * world_size}; lower --batch-size or add videos."
            )

    @property
    def items_per_epoch(self) -> int:
        """Items in one epoch's plan, before dropping the incomplete last global batch."""
        return sum(clips_per_video(n, self.length_bounds, self.counts) for n in self.video_lengths)

    @property
    def batches_per_epoch(self) -> int:
        """Batches each rank yields per epoch."""
        return self.items_per_epoch // (self.batch_size * self.world_size)

    def epoch_plan(self, epoch: int) -> list[SampleSpec]:
        """All items of `epoch` (every rank's), shuffled; a pure function of (seed, epoch)."""
        rng = np.random.default_rng([self.seed, epoch])
        plan = []
        for video, num_frames in enumerate(self.video_lengths):
            for _ in range(clips_per_video(num_frames, self.length_bounds, self.counts)):
                clip = sample_clip(rng, num_frames, self.clip_len, self.min_step, self.max_step)
                past, current, future = sample_triplet(rng, num_frames, self.fps, self.context_seconds)
                seed = int(rng.integers(0, 2**62))
                plan.append(SampleSpec(video, tuple(int(i) for i in clip), past, current, future, seed))
        order = rng.permutation(len(plan))
        return [plan[i] for i in order]

    def rank_items(self, epoch: int) -> list[SampleSpec]:
        """This rank's share of the epoch: items rank, rank+W, ... of the plan cut to whole global batches."""
        usable = self.batches_per_epoch * self.batch_size * self.world_size
        return self.epoch_plan(epoch)[:usable][self.rank :: self.world_size]

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
        items = self.rank_items(self.epoch)
        for batch in range(self.start_batch, self.batches_per_epoch):
            yield items[batch * self.batch_size : (batch + 1) * self.batch_size]
