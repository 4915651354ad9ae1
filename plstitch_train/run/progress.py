"""What a training run shows while it runs: the plan line before the first step and the live progress line."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from rich.progress import TextColumn

from plstitch_eval.utils.console import console, logger, progress_bar
from plstitch_train.config import LOSS_KEYS, OptimConfig

# LOSS_KEYS is re-exported from its home, plstitch_train/config/branches.py
__all__ = ["LOSS_KEYS", "LiveLine", "announce_plan"]


class LiveLine:
    """Rich progress bar on stderr (rank 0) with per-branch losses, lr, samples/s and ETA.

    When stderr is not a terminal (a log file, CI) the same line is logged after the first step (the run has
    started) and then every `log_every` steps instead.
    """

    def __init__(self, total: int, start: int, enabled: bool, log_every: int) -> None:
        self.enabled, self.total, self.log_every = enabled, total, log_every
        self.interactive = enabled and console.is_terminal
        self.progress = progress_bar(TextColumn("{task.fields[info]}"), disable=not self.interactive)
        self.task = self.progress.add_task("train", total=total, completed=start, info="")
        self.started = time.perf_counter()
        self.start_step = start
        self.collapse = ""  # the latest collapse check shown: teacher entropy / log K (monitors.collapse)
        self.knn = ""  # the latest k-NN accuracy of the teacher (monitors.knn)

    def __enter__(self) -> LiveLine:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, step: int, record: dict[str, float], collapsed: bool = False) -> None:
        """Show step `step`'s record; the latest k-NN accuracy and collapse check stay shown until the next,
        `collapsed` (the collapse monitor has warned) adds `COLLAPSE?`."""
        parts = [f"{k} {record[k]:.4f}" for k in LOSS_KEYS if k in record]
        parts += [f"lr {record['lr']:.2e}", f"{record['samples_per_s']:.1f} samples/s"]
        if "knn_acc" in record:
            self.knn = f"kNN {record['knn_acc']:.1f}"
        if "collapse_entropy_ratio" in record:
            self.collapse = f"H/logK {record['collapse_entropy_ratio']:.2f}"
        parts += [text for text in (self.knn, self.collapse) if text]
        if collapsed:
            parts.append("COLLAPSE?")
        if self.interactive:
            self.progress.update(self.task, completed=step, info="  ".join(parts))
        elif self.enabled and (step % self.log_every == 0 or step in (self.start_step + 1, self.total)):
            per_step = (time.perf_counter() - self.started) / max(step - self.start_step, 1)
            eta = per_step * (self.total - step)
            logger.info("step %d/%d  %s  ETA %.0fs", step, self.total, "  ".join(parts), eta)


def announce_plan(
    optim: OptimConfig, step: int, total: int, per_epoch: int, device: torch.device, out_dir: Path
) -> None:
    """One line before the first step: how many steps (and epochs of how many), the batch (of the run's
    `optim` section), where it runs."""
    epochs = total / per_epoch
    logger.info(
        "training: %s%d steps (%s epoch%s of %d steps, batch %d) on %s into %s",
        f"from step {step} of " if step else "",
        total,
        f"{epochs:g}" if epochs == int(epochs) else f"{epochs:.2f}",
        "" if epochs == 1 else "s",
        per_epoch,
        optim.batch_size,
        device,
        out_dir,
    )
