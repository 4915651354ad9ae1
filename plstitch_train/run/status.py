"""How far a `plstitch train` run got, read from its checkpoint: the settings it was made with, the step it
reached, the planned total and the epoch of its last step (what an export of an unfinished run says).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_train.config import TrainConfig
from plstitch_train.schedules import planned_steps

__all__ = ["RunProgress", "run_progress", "trainer_config"]


@dataclass(frozen=True)
class RunProgress:
    """How far the run behind a checkpoint got: step reached, planned total, epoch of its last step.

    `total_steps` is None when the checkpoint cannot tell it (stopped in the first epoch, so the number of
    steps per epoch is unknown); `epoch` is 1-based, the epoch the last step belonged to.
    """

    step: int
    total_steps: int | None
    epoch: int | None
    epochs: int | None

    @property
    def finished(self) -> bool:
        """True when the checkpoint holds the planned last step."""
        return self.total_steps is not None and self.step >= self.total_steps

    def describe(self) -> str:
        """The card's and the log's words: `unfinished run: stopped at step 3 of 4 (epoch 2 of 2)`."""
        epochs = f"epoch {self.epoch} of {self.epochs}" if self.epoch and self.epochs else ""
        if self.total_steps is not None:
            where = f"step {self.step} of {self.total_steps}" + (f" ({epochs})" if epochs else "")
        else:
            where = f"step {self.step} of an unrecorded total ({epochs + '; ' if epochs else ''}"
            where += "the checkpoint does not record the planned number of steps)"
        return f"unfinished run: stopped at {where}"

    def to_dict(self) -> dict[str, Any]:
        """What plstitch.json records under `training_status`."""
        return {
            "finished": self.finished,
            "step": self.step,
            "total_steps": self.total_steps,
            "epoch": self.epoch,
            "epochs": self.epochs,
            "note": None if self.finished else self.describe(),
        }


def trainer_config(checkpoint: Any) -> TrainConfig | None:
    """The `TrainConfig` a `plstitch train` checkpoint was made with; None for any other checkpoint."""
    if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("config"), Mapping):
        return None
    if not isinstance(checkpoint.get("model"), Mapping):
        return None
    try:
        return TrainConfig.from_dict(dict(checkpoint["config"]))
    except (ConfigError, TypeError, ValueError):
        return None


def run_progress(checkpoint: Mapping[str, Any], config: TrainConfig) -> RunProgress:
    """Step, planned total and epoch of a `plstitch train` checkpoint.

    Why derived: the checkpoint records the step and the sampler's next position (epoch, micro-batch), so
    once an epoch is complete, steps per epoch = (step - steps into the current epoch) / epoch, and the
    planned total is epochs x that (capped by `max_steps`). A `total_steps` entry, when present, wins.
    """
    step = int(checkpoint["step"])
    sampler = checkpoint.get("sampler") if isinstance(checkpoint.get("sampler"), Mapping) else {}
    next_epoch, next_batch = sampler.get("epoch"), sampler.get("batch")
    total = checkpoint.get("total_steps")
    epoch = None
    if isinstance(next_epoch, int) and isinstance(next_batch, int):
        into_epoch = next_batch // max(config.optim.accum_steps, 1)
        epoch = next_epoch + 1 if into_epoch else next_epoch  # the epoch of the last step (1-based)
        if not isinstance(total, int) and next_epoch >= 1 and (step - into_epoch) % next_epoch == 0:
            total = planned_steps(config.optim, (step - into_epoch) // next_epoch)
    return RunProgress(step, total if isinstance(total, int) else None, epoch, config.optim.epochs)
