"""Rich console on stderr (logs, progress) so that stdout carries only results."""

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

console = Console(stderr=True)
logger = logging.getLogger("plstitch")


def setup_logging(level: int = logging.INFO) -> None:
    """Send the `plstitch` logger to stderr through rich, once."""
    if not any(isinstance(h, RichHandler) for h in logger.handlers):
        logger.addHandler(RichHandler(console=console, show_path=False, rich_tracebacks=False))
    logger.setLevel(level)
    logger.propagate = False


def progress_bar(*extra_columns: TextColumn, disable: bool = False) -> Progress:
    """A rich progress bar on stderr: description, bar, n/total, elapsed, ETA, plus extra columns."""
    return Progress(
        TextColumn("[bold blue]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        *extra_columns,
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=disable,
        transient=False,
    )
