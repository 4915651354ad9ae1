"""The `optim` section of a TrainConfig: run length, batch, AdamW and its schedules, teacher EMA, clipping."""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_train.config.section import Section, require


@dataclass
class OptimConfig(Section):
    """What `plstitch_train.schedules.Schedules` and the optimizer step read; `batch_size` is global."""

    NAME = "optim"

    epochs: int = 30
    max_steps: int | None = None  # cap on optimizer steps; the schedules span min(epochs, max_steps)
    batch_size: int = 240  # global batch (all processes, all accumulation micro-steps)
    accum_steps: int = 1
    base_lr: float = 4e-4  # scaled by batch_size / 256
    min_lr: float = 1e-6
    warmup_epochs: float = 3.0
    weight_decay: float = 0.04
    weight_decay_end: float = 0.4
    momentum_teacher: float = 0.998
    clip_grad: float = 3.0
    clip_per_parameter: bool = True  # DINO/iBOT clip each parameter's gradient norm separately
    freeze_last_layer_epochs: int = 1

    def __post_init__(self) -> None:
        require(self.epochs >= 1, f"epochs must be >= 1 (got {self.epochs}).")
        require(
            self.max_steps is None or self.max_steps >= 1,
            f"max_steps must be >= 1 or unset (got {self.max_steps}).",
        )
        require(self.batch_size >= 1, f"batch_size must be >= 1 (got {self.batch_size}).")
        require(self.accum_steps >= 1, f"accum_steps must be >= 1 (got {self.accum_steps}).")
        require(
            0 <= self.momentum_teacher <= 1,
            f"momentum_teacher must be in [0, 1] (got {self.momentum_teacher}).",
        )
