"""SIGINT / SIGTERM in training: stop at the next step boundary with a checkpoint (a second signal stops at
once) and say the command that resumes; every rank agrees on the step to stop after.
"""

from __future__ import annotations

import os
import shlex
import signal
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from plstitch_eval.hub.run_folder import CHECKPOINT_NAME
from plstitch_eval.utils.distributed import DistInfo

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
DUPLICATE_SIGNAL_S = 1.0  # under torchrun one Ctrl-C arrives twice (terminal + agent): count it once


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by SIGINT/SIGTERM; `message()` names the checkpoint and the command that resumes.

    A KeyboardInterrupt, so `except Exception` never swallows it; `exit_code` is 128 + signal (130, 143).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.run_dir: Path | None = None
        self.saved_step: int | None = None
        self.total_steps: int | None = None
        self.resume_command = ""

    @property
    def exit_code(self) -> int:
        """The shell's code for death by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum

    def message(self) -> str:
        """One or two lines for stderr: where the last checkpoint is and how to continue."""
        name = signal.Signals(self.signum).name
        if self.saved_step is None:
            return f"stopped by {name} before a first checkpoint in {self.run_dir}; rerun the same command."
        of_total = f" of {self.total_steps}" if self.total_steps else ""
        return (
            f"stopped by {name}; {self.run_dir / CHECKPOINT_NAME} holds step {self.saved_step}{of_total}."
            f"\nresume with: {self.resume_command}  (or rerun the same command)"
        )


def resume_command(run_dir: Path, info: DistInfo) -> str:
    """The shell command that resumes `run_dir`: `plstitch train --resume RUN`, or its torchrun launch."""
    target = shlex.quote(str(run_dir))
    if info.world_size == 1:
        return f"plstitch train --resume {target}"
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", info.world_size))
    command = f"torchrun --nproc_per_node {per_node} -m plstitch_eval train --resume {target}"
    if per_node != info.world_size:
        command += " (on every node, with your --nnodes/--rdzv-* options)"
    return command


class StopSignals:
    """SIGINT/SIGTERM in training: the first asks to stop at the next step boundary, a second stops at once.

    Why: a stop between steps leaves a checkpoint that resumes exactly; before the step loop (decoding,
    building) there is nothing to save, so a signal stops at once there. Installed only in the main thread.
    """

    def __init__(self, announce: bool = False, duplicate_s: float = 0.0) -> None:
        self.announce, self.duplicate_s = announce, duplicate_s
        self.graceful = False  # True while the step loop can stop at a boundary
        self.requested: int | None = None  # the signal that asked to stop
        self.saved_step: int | None = None  # the step of the newest checkpoint on disk
        self.total_steps: int | None = None
        self._received_at = 0.0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self.handle) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def handle(self, signum: int, frame: object = None) -> None:
        """Signal handler: record the request (first, in the loop) or raise TrainingInterrupted."""
        now = time.monotonic()
        if self.requested is not None and now - self._received_at < self.duplicate_s:
            return  # one Ctrl-C delivered twice under torchrun (terminal and agent)
        immediate = not self.graceful or self.requested is not None
        self.requested, self._received_at = signum, now
        if immediate:
            raise TrainingInterrupted(signum)
        if self.announce:
            os.write(2, b"\nstopping after this step to save a checkpoint (Ctrl-C again stops at once)\n")


def agreed_stop(requested: int | None, info: DistInfo, device: torch.device) -> int | None:
    """The stop signal any rank received (max over ranks), so that every rank stops after the same step."""
    if info.world_size == 1:
        return requested
    flag = torch.tensor([requested or 0], dtype=torch.int64, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item()) or None


def stderr_is_terminal() -> bool:
    """Whether a person watches stderr (then the first Ctrl-C is acknowledged at once)."""
    try:
        return os.isatty(2)
    except OSError:
        return False


def ignore_stop_signals(worker_id: int) -> None:
    """DataLoader workers ignore SIGINT/SIGTERM; the main process stops them after its checkpoint.

    Why: a terminal's Ctrl-C reaches the whole process group, and a worker dying mid-epoch fails the step.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
