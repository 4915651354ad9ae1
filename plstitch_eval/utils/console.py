"""Rich console on stderr (logs, progress) so that stdout carries only results.

No message is ever read as rich markup: every console here has `markup=False`, so user paths such as
`runs/[exp1]/feats` and texts such as `hf-hub:ORG/NAME[/FILE]` print verbatim; styling uses `Text`/`style=`.
`--quiet` silences `console` (progress bars, informational lines and tables); warnings and errors still reach
stderr through `error_console`.
"""

from __future__ import annotations

import logging

from rich.console import Console
from rich.logging import RichHandler
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

console = Console(stderr=True, markup=False)  # informational output: silenced by --quiet
error_console = Console(stderr=True, markup=False)  # warnings and errors: never silenced
logger = logging.getLogger("plstitch")


def result_console(**kwargs) -> Console:
    """A console on stdout for results (tables), never markup, never silenced by --quiet.

    Why: results belong on stdout whatever the log level; cells and titles hold user text.
    """
    return Console(markup=False, **kwargs)


def setup_logging(level: int = logging.INFO, quiet: bool = False) -> None:
    """Send the `plstitch` logger to stderr through rich (one handler, markup off); `quiet` mutes `console`.

    Why: called once per CLI invocation, so a later call without `--quiet` turns the output back on.
    """
    console.quiet = quiet
    handler = next((h for h in logger.handlers if isinstance(h, RichHandler)), None)
    if handler is None:
        handler = RichHandler(console=console, show_path=False, rich_tracebacks=False, markup=False)
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


def progress_bar(*extra_columns: TextColumn, disable: bool = False) -> Progress:
    """A rich progress bar on stderr: description, bar, n/total, elapsed, ETA, plus extra columns.

    Disabled under `--quiet`; the description is printed verbatim (no markup).
    """
    return Progress(
        TextColumn("{task.description}", style="bold blue", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        *extra_columns,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=disable or console.quiet,
        transient=False,
    )
