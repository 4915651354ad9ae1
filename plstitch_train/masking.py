"""Block-wise patch masking for masked image modelling (the BEiT / iBOT algorithm, from its description)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from plstitch_eval.errors import ConfigError

__all__ = ["BlockMaskGenerator", "RandomSource"]

RandomSource = torch.Generator | np.random.Generator | int | None


class _Draws:
    """Uniform floats and integers from a torch or numpy Generator, a seed, or torch's global RNG."""

    def __init__(self, source: RandomSource) -> None:
        if isinstance(source, int) and not isinstance(source, bool):
            source = np.random.default_rng(source)
        self.source = source

    def uniform(self, low: float, high: float) -> float:
        if isinstance(self.source, np.random.Generator):
            unit = float(self.source.random())
        else:
            unit = float(torch.rand((), generator=self.source, dtype=torch.float64))
        return low + (high - low) * unit  # like random.uniform: also fine when high < low

    def integer(self, low: int, high: int) -> int:
        """Uniform integer in [low, high], both inclusive."""
        if isinstance(self.source, np.random.Generator):
            return int(self.source.integers(low, high + 1))
        return int(torch.randint(low, high + 1, (), generator=self.source))


@dataclass
class BlockMaskGenerator:
    """Masks about `ratio` of an H x W patch grid with random rectangles (bool [H, W], True = masked).

    Until the target count `ratio * H * W` is reached: draw a block area uniformly in
    [min_num_patches, remaining], a log-uniform aspect ratio in (min_aspect, max_aspect),
    h = round(sqrt(area * ar)), w = round(sqrt(area / ar)), a random position; keep the block if it masks
    between 1 and `remaining` new patches (capped by `max_num_patches`); up to 10 attempts per block; stop
    when a block makes no progress.
    `ratio` may be a (min, max) range drawn per mask.
    """

    grid: tuple[int, int] = (14, 14)
    ratio: float | tuple[float, float] = 0.3
    min_num_patches: int | None = None  # default (min(H, W) // 3) ** 2, at least 1
    max_num_patches: int | None = None  # cap on one block's area; default: no cap beyond the remaining budget
    min_aspect: float = 0.3
    max_aspect: float | None = None  # default 1 / min_aspect
    attempts_per_block: int = 10

    def __post_init__(self) -> None:
        if isinstance(self.grid, int):
            self.grid = (self.grid, self.grid)
        self.grid = (int(self.grid[0]), int(self.grid[1]))
        height, width = self.grid
        if height < 1 or width < 1:
            raise ConfigError(f"BlockMaskGenerator: grid must be positive, got {self.grid}")
        low, high = self.ratio_range
        if not 0.0 <= low <= high <= 1.0:
            raise ConfigError(
                f"BlockMaskGenerator: ratio must lie in [0, 1] with min <= max, got {self.ratio}"
            )
        if self.min_num_patches is None:
            self.min_num_patches = max((min(height, width) // 3) ** 2, 1)
        if self.max_aspect is None:
            self.max_aspect = 1.0 / self.min_aspect
        if not 0 < self.min_aspect <= self.max_aspect:
            raise ConfigError(f"BlockMaskGenerator: need 0 < min_aspect <= max_aspect, got {self.min_aspect}")
        self._log_aspect = (math.log(self.min_aspect), math.log(self.max_aspect))

    @property
    def num_patches(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def ratio_range(self) -> tuple[float, float]:
        if isinstance(self.ratio, (tuple, list)):
            return float(self.ratio[0]), float(self.ratio[1])
        return float(self.ratio), float(self.ratio)

    def __call__(self, generator: RandomSource = None) -> torch.Tensor:
        """One mask, bool [H, W]; pass a Generator (torch or numpy) or a seed for reproducible draws."""
        draws = _Draws(generator)
        low, high = self.ratio_range
        ratio = low if low == high else draws.uniform(low, high)
        target = ratio * self.num_patches
        mask = np.zeros(self.grid, dtype=bool)
        count = 0
        while count < target:
            remaining = target - count
            if self.max_num_patches is not None:
                remaining = min(remaining, self.max_num_patches)
            added = self._place_block(mask, remaining, draws)
            if added == 0:
                break
            count += added
        return torch.from_numpy(mask)

    def batch(self, batch_size: int, generator: RandomSource = None) -> torch.Tensor:
        """`batch_size` independent masks, bool [B, H, W]."""
        draws_source = np.random.default_rng(generator) if isinstance(generator, int) else generator
        return torch.stack([self(draws_source) for _ in range(batch_size)]) if batch_size else self._empty()

    def _empty(self) -> torch.Tensor:
        return torch.zeros((0, *self.grid), dtype=torch.bool)

    def _place_block(self, mask: np.ndarray, remaining: float, draws: _Draws) -> int:
        """Try to add one rectangle masking 1..`remaining` new patches; return how many it added."""
        height, width = self.grid
        for _ in range(self.attempts_per_block):
            area = draws.uniform(self.min_num_patches, remaining)
            aspect = math.exp(draws.uniform(*self._log_aspect))
            h = int(round(math.sqrt(area * aspect)))
            w = int(round(math.sqrt(area / aspect)))
            if 0 < h < height and 0 < w < width:
                top = draws.integer(0, height - h)
                left = draws.integer(0, width - w)
                block = mask[top : top + h, left : left + w]
                new = h * w - int(block.sum())
                if 0 < new <= remaining:
                    block[...] = True
                    return new
        return 0
