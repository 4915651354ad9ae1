"""Rich console on stderr (logs, progress) so that stdout carries only results.

No message is ever read as rich markup: every console here has `markup=False`, so user paths such as
`runs/[exp1]/feats` and texts such as `hf-hub:ORG/NAME[/FILE]` print verbatim; styling uses `Text`/`style=`.
`--quiet` silences `console` (progress bars, informational lines and tables); warnings and errors still reach
stderr through `error_console`. On a terminal `progress_bar` draws a live rich bar; when stderr is a file or a
pipe it prints a plain progress line instead, at most every `PROGRESS_LINE_EVERY_S` seconds, so a log shows
long work while it runs (`LineProgress`). A record logged with `extra=ONE_LINE` prints as one line, `level:
message`, however narrow the terminal (a plugin that did not load: `plstitch_eval/registry.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

console = Console(stderr=True, markup=False)  # informational output: silenced by --quiet
error_console = Console(stderr=True, markup=False)  # warnings and errors: never silenced
logger = logging.getLogger("plstitch")
PROGRESS_LINE_EVERY_S = 5.0  # off a terminal: at most one progress line per task this often
ONE_LINE = {"one_line": True}  # `logger.warning(..., extra=ONE_LINE)`: one line, never wrapped by rich
LEVEL_STYLES = {"WARNING": "yellow", "ERROR": "bold red", "CRITICAL": "bold red"}


def result_console(**kwargs) -> Console:
    """A console on stdout for results (tables), never markup, never silenced by --quiet.

    Why: results belong on stdout whatever the log level; cells and titles hold user text.
    """
    return Console(markup=False, **kwargs)


class LogHandler(RichHandler):
    """rich's log handler (time, level, message wrapped to the terminal), except for records marked
    `ONE_LINE`: those print as `level: message` on a single line that rich never splits (soft wrap), so a
    grep or a log file sees the whole message on one line even at 40 columns."""

    def emit(self, record: logging.LogRecord) -> None:
        if not getattr(record, "one_line", False):
            super().emit(record)
            return
        try:
            level = record.levelname
            text = Text.assemble((f"{level.lower()}:", LEVEL_STYLES.get(level, "")), " ", record.getMessage())
            self.console.print(text, soft_wrap=True, highlight=False)
        except Exception:  # noqa: BLE001 - logging's own rule: a failing handler reports, never raises
            self.handleError(record)


def setup_logging(level: int = logging.INFO, quiet: bool = False) -> None:
    """Send the `plstitch` logger to stderr through rich (one handler, markup off); `quiet` mutes `console`.

    Why: called once per CLI invocation, so a later call without `--quiet` turns the output back on.
    """
    console.quiet = quiet
    handler = next((h for h in logger.handlers if isinstance(h, LogHandler)), None)
    if handler is None:
        handler = LogHandler(console=console, show_path=False, rich_tracebacks=False, markup=False)
        logger.addHandler(handler)
    # a muted console would swallow warnings; while quiet there is no progress bar to draw around
    handler.console = error_console if quiet else console
    logger.setLevel(level)
    logger.propagate = False


def is_quiet() -> bool:
    """Whether `--quiet` muted the informational console."""
    return console.quiet


def print_error(message: object, label: str = "error", style: str = "bold red") -> None:
    """Print `label: message` as one line on stderr (label styled), the message verbatim (never markup).

    Why: error texts hold user paths and spec syntax with brackets that rich would eat or choke on.
    """
    text = Text.assemble((f"{label}:", style), " ", str(message))
    error_console.print(text, highlight=False, soft_wrap=True)


def progress_bar(
    *extra_columns: ProgressColumn,
    disable: bool = False,
    every_s: float = PROGRESS_LINE_EVERY_S,
    get_time: Callable[[], float] | None = None,
) -> Progress:
    """A progress display on stderr: description, bar, n/total, elapsed, ETA, plus extra columns.

    On a terminal, a live rich bar. When stderr is a file or a pipe, plain lines instead (`LineProgress`):
    one after a task's first step, then at most every `every_s` seconds, and one when it finishes - a live
    bar there would show nothing until the end. Disabled (nothing at all) under `--quiet` or with `disable`;
    the description is printed verbatim (no markup). `get_time`: the clock (tests), default monotonic.
    """
    off = disable or console.quiet
    columns = (
        TextColumn("{task.description}", style="bold blue", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        *extra_columns,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    options: dict[str, Any] = {"console": console, "transient": False}
    if get_time is not None:
        options["get_time"] = get_time
    if off or console.is_terminal:
        return Progress(*columns, disable=off, **options)
    return LineProgress(*columns, line_columns=extra_columns, every_s=every_s, **options)


class LineProgress(Progress):
    """A rich `Progress` that draws no bar and prints each task's state as one plain line on its console.

    Why: off a terminal (a log file, a pipe, CI) rich only draws the bar when it stops, so hours of work
    print nothing. Lines: after the first step, then at most every `every_s` seconds, and at completion (or
    at `stop` when the last state was not printed) - `desc: n/total (p%)  <extra columns>  elapsed 0:01:05,
    1.6/s, ETA 0:00:40`. The rate is the mean since the task was added (its `completed` then excluded).
    """

    def __init__(
        self,
        *columns: str | ProgressColumn,
        line_columns: Sequence[ProgressColumn] = (),
        every_s: float = PROGRESS_LINE_EVERY_S,
        **options: Any,
    ) -> None:
        super().__init__(*columns, disable=True, **options)  # no live display; `console.print` lines
        self.line_columns, self.every_s = tuple(line_columns), float(every_s)
        self._start_completed: dict[TaskID, float] = {}
        self._printed: dict[TaskID, tuple[float, float]] = {}  # task -> (time, completed) of its last line

    def add_task(self, description: str, *args: Any, **kwargs: Any) -> TaskID:
        task_id = super().add_task(description, *args, **kwargs)
        self._start_completed[task_id] = self._tasks[task_id].completed
        return task_id

    def update(self, task_id: TaskID, **kwargs: Any) -> None:
        super().update(task_id, **kwargs)
        self._maybe_print(task_id)

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._maybe_print(task_id)

    def stop(self) -> None:
        super().stop()
        for task_id in list(self._tasks):
            self._maybe_print(task_id, final=True)

    def _maybe_print(self, task_id: TaskID, final: bool = False) -> None:
        with self._lock:
            task = self._tasks[task_id]
            now = self.get_time()
            last = self._printed.get(task_id)
            if not task.visible or task.completed == (
                self._start_completed[task_id] if last is None else last[1]
            ):
                return  # nothing new since the last line (or since the task began)
            if not (final or task.finished or last is None or now - last[0] >= self.every_s):
                return
            self._printed[task_id] = (now, task.completed)
            line = progress_line(task, self.line_columns, self._start_completed[task_id])
        self.console.print(Text(line), highlight=False, soft_wrap=True)


def progress_line(task: Task, columns: Sequence[ProgressColumn] = (), start_completed: float = 0.0) -> str:
    """One plain line of a task: `desc: n/total (p%)  <columns>  elapsed H:MM:SS, rate/s, ETA H:MM:SS`.

    Why: what the live bar shows, for a file; the rate is `(completed - start_completed) / elapsed`.
    """
    head = f"{task.description}: {_count(task.completed)}"
    if task.total:
        head += f"/{_count(task.total)} ({100.0 * task.completed / task.total:.0f}%)"
    parts = [head]
    for column in columns:
        try:
            rendered = column.render(task)
        except (KeyError, AttributeError, IndexError, ValueError, TypeError):
            continue  # a field the task does not carry
        text = rendered.plain if isinstance(rendered, Text) else str(rendered)
        if text.strip():
            parts.append(text.strip())
    elapsed = task.elapsed or 0.0
    timing = [f"elapsed {_clock(elapsed)}"]
    done = task.completed - start_completed
    if elapsed > 0 and done > 0:
        rate = done / elapsed
        timing.append(f"{rate:.3g}/s" if rate >= 1 else f"{1 / rate:.3g} s each")
        if task.total and not task.finished:
            timing.append(f"ETA {_clock(max(task.total - task.completed, 0) / rate)}")
    parts.append(", ".join(timing))
    return "  ".join(parts)


def _count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def _clock(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
