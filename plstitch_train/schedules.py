"""Per-step schedules: cosine with linear warm-up (lr, weight decay, teacher momentum); jigsaw ramp-in."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from plstitch_train.config import OptimConfig


def cosine_schedule(
    base: float, final: float, total_steps: int, warmup_steps: int = 0, warmup_start: float = 0.0
) -> np.ndarray:
    """Values for steps 0..total_steps-1: linear warm-up to base, then final + (base-final)(1+cos(pi t))/2.

    Matches DINO's `cosine_scheduler` with t = i / (cosine steps) over the steps after warm-up.
    """
    warmup_steps = min(max(int(warmup_steps), 0), total_steps)
    warmup = np.linspace(warmup_start, base, warmup_steps) if warmup_steps else np.zeros(0)
    steps = np.arange(total_steps - warmup_steps)
    cosine = final + 0.5 * (base - final) * (1 + np.cos(np.pi * steps / max(len(steps), 1)))
    return np.concatenate([warmup, cosine]).astype(np.float64)


def ramp_weight(weight: float, epoch: float, start_epoch: float, ramp_epochs: float) -> float:
    """Jigsaw weight at (fractional) `epoch`: 0 before `start_epoch`, then weight * (1 - cos(pi u)) / 2."""
    if weight <= 0 or epoch < start_epoch:
        return 0.0
    if ramp_epochs <= 0:
        return float(weight)
    progress = min(1.0, (epoch - start_epoch) / ramp_epochs)
    return float(weight * 0.5 * (1 - math.cos(math.pi * progress)))


def scaled_lr(base_lr: float, batch_size: int) -> float:
    """Linear scaling rule: base_lr * batch_size / 256."""
    return base_lr * batch_size / 256


def planned_steps(optim: OptimConfig, steps_per_epoch: int) -> int:
    """Optimizer steps of a run: `epochs` x `steps_per_epoch`, capped by `max_steps` when set."""
    total = optim.epochs * steps_per_epoch
    return total if optim.max_steps is None else min(total, optim.max_steps)


class Schedules:
    """lr, weight decay and teacher momentum for every optimizer step of a run."""

    def __init__(
        self,
        total_steps: int,
        steps_per_epoch: int,
        *,
        base_lr: float,
        min_lr: float,
        warmup_epochs: float,
        weight_decay: float,
        weight_decay_end: float,
        momentum_teacher: float,
        batch_size: int,
    ) -> None:
        warmup = round(warmup_epochs * steps_per_epoch)
        self.lr = cosine_schedule(scaled_lr(base_lr, batch_size), min_lr, total_steps, warmup)
        self.weight_decay = cosine_schedule(weight_decay, weight_decay_end, total_steps)
        self.momentum = cosine_schedule(momentum_teacher, 1.0, total_steps)

    @classmethod
    def from_settings(cls, optim: OptimConfig, total_steps: int, steps_per_epoch: int) -> Schedules:
        """The schedules of a run's `optim` section: `total_steps` steps of `steps_per_epoch` per epoch."""
        return cls(
            total_steps,
            steps_per_epoch,
            base_lr=optim.base_lr,
            min_lr=optim.min_lr,
            warmup_epochs=optim.warmup_epochs,
            weight_decay=optim.weight_decay,
            weight_decay_end=optim.weight_decay_end,
            momentum_teacher=optim.momentum_teacher,
            batch_size=optim.batch_size,
        )

    def __len__(self) -> int:
        return len(self.lr)
