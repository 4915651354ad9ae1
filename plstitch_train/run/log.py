"""The run's log: each logged record appended to `log.jsonl` and, where the `tensorboard` package is
installed, mirrored as scalars to TensorBoard event files in the run folder (`tensorboard --logdir runs/`).

Why both: `log.jsonl` is the record (`plstitch analyze run` draws it, tests read it) and stays byte for byte
what it was; TensorBoard is a live view that needs no command. The event files sit directly in the run folder,
so TensorBoard names each run by its folder. A resumed run purges the points after its checkpoint's step
(`purge_step`), as `log.jsonl` drops them: the two never show a step twice. Only rank 0 appends.
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from plstitch_eval.hub.run_folder import TENSORBOARD_EVENTS, log_path
from plstitch_eval.utils.console import logger
from plstitch_train.config import LOSS_KEYS
from plstitch_train.run.plan import append_log

__all__ = ["FLUSH_SECONDS", "RunLog", "scalar_tag", "tensorboard_available"]

FLUSH_SECONDS = 30  # a live TensorBoard lags the log by at most this much (its default is 120)
SCHEDULE_KEYS = ("lr", "weight_decay", "momentum")
PROGRESS_KEYS = ("epoch", "time", "samples_per_s", "data_fraction")
PREFIX_GROUPS = {"collapse_": "collapse", "knn_": "knn"}  # `collapse_entropy_ratio` -> collapse/entropy_ratio


def tensorboard_available() -> bool:
    """Whether the `tensorboard` package is installed (the `tensorboard` extra); imports nothing."""
    return importlib.util.find_spec("tensorboard") is not None


def scalar_tag(key: str) -> str | None:
    """The TensorBoard tag of a log key: `loss/<branch>` (`loss/total`), `schedule/lr`, `collapse/...`,
    `knn/...`, `progress/...`, else `other/<key>`; None for `step`, the x axis.

    Why groups: TensorBoard draws one section per prefix, so each group's curves sit together.
    """
    if key == "step":
        return None
    if key in LOSS_KEYS:
        return "loss/total" if key == "loss" else f"loss/{key}"
    if key in SCHEDULE_KEYS:
        return f"schedule/{key}"
    for prefix, group in PREFIX_GROUPS.items():
        if key.startswith(prefix):
            return f"{group}/{key[len(prefix) :]}"
    if key in PROGRESS_KEYS:
        return f"progress/{key}"
    return f"other/{key}"


class RunLog:
    """Appends records to `run_dir/log.jsonl` and, with TensorBoard installed, writes them as scalars.

    A context manager: leaving it closes the event file (a stop, a collapse or an error included). The
    TensorBoard writer opens at the first record, so ranks that never append write nothing.
    """

    def __init__(self, run_dir: str | Path, start_step: int = 0, tensorboard: bool | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = log_path(self.run_dir)
        self.start_step = start_step  # the step the run (re)starts at: an old run's later points are purged
        self.tensorboard = tensorboard_available() if tensorboard is None else tensorboard
        self._writer: Any = None
        self._appended = False

    def append(self, record: dict[str, Any]) -> None:
        """One record: a line of log.jsonl (exactly as `append_log` writes it), then its scalars."""
        append_log(self.path, record)
        if not self._appended and not self.tensorboard:
            logger.debug('TensorBoard not installed (pip install "plstitch[tensorboard]"): log.jsonl only.')
        self._appended = True
        if self.tensorboard:
            self._write_scalars(record)

    def _write_scalars(self, record: dict[str, Any]) -> None:
        writer = self._writer or self._open()
        if writer is None:
            return
        step = int(record["step"])
        for key, value in record.items():
            tag = scalar_tag(key)
            if tag is not None and isinstance(value, int | float) and not isinstance(value, bool):
                writer.add_scalar(tag, float(value), step)

    def _open(self) -> Any:
        """The event-file writer, purging the points of an earlier run after `start_step`."""
        try:
            from torch.utils.tensorboard import SummaryWriter  # optional: the `tensorboard` extra
        except ImportError as exc:  # tensorboard present but unusable with this torch: log.jsonl only
            logger.debug("TensorBoard unavailable (%s); logging to %s only.", exc, self.path)
            self.tensorboard = False
            return None
        after_earlier_events(self.run_dir)
        self._writer = SummaryWriter(
            str(self.run_dir), purge_step=self.start_step + 1, flush_secs=FLUSH_SECONDS
        )
        logger.debug("TensorBoard event files in %s (%s).", self.run_dir, TENSORBOARD_EVENTS)
        return self._writer

    def close(self) -> None:
        """Flush and close the event file (log.jsonl is closed after every record)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def after_earlier_events(run_dir: Path) -> None:
    """Wait (under a second) until the clock is past the second of `run_dir`'s newest event file.

    Why: TensorBoard reads a folder's event files in name order; a name starts with the second it was opened
    in, then a per-process counter that sorts 10 before 9. A restart opened within that second (in the same
    process) could be read before the earlier start, and its steps purged as out of order.
    """
    names = [path.name.split(".") for path in run_dir.glob(TENSORBOARD_EVENTS)]
    seconds = [int(name[3]) for name in names if name[3].isdigit()]
    if seconds:
        time.sleep(max(0.0, max(seconds) + 1 - time.time()))
