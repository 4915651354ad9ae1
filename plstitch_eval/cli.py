"""The `plstitch` command line: a thin Typer app that parses arguments and calls library functions.

Each command module of `plstitch_eval.commands` has a `register(app)` function; this file wires them up and
turns `PlstitchError` into one red line on stderr and exit code 1 (`--debug` shows the traceback). It is the
top floor: only `plstitch_eval/__main__.py` (`python -m plstitch_eval`, the torchrun entry) imports it.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
from typing import Annotated, Any

import click
import typer
from typer.core import TyperGroup

from plstitch_eval import __version__
from plstitch_eval.commands import (
    analyze,
    benchmark,
    data,
    evaluate,
    frames,
    hub,
    predict,
    publish,
    quickstart,
    report,
    reproduce,
    tasks,
    temporal,
    train,
)
from plstitch_eval.errors import PlstitchError
from plstitch_eval.utils.console import console, print_error, setup_logging

GLOBAL_FLAGS = ("--debug", "--quiet", "-q")  # accepted before or after the command name


def hoist_global_flags(args: list[str]) -> list[str]:
    """Move the app-wide flags given after the command name in front of it, so `plstitch knn -q` works.

    Arguments after a bare `--` are left alone (they are values, not options).
    """
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in GLOBAL_FLAGS]
    rest = [a for a in args[:end] if a not in GLOBAL_FLAGS]
    return flags + rest + args[end:]


class _ErrorHandlingGroup(TyperGroup):
    """Click group that reports our own errors as one line instead of a traceback."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist_global_flags(list(args)))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PlstitchError as exc:
            if ctx.params.get("debug") or os.environ.get("PLSTITCH_DEBUG"):
                raise
            print_error(exc)
            raise typer.Exit(code=1) from None
        finally:
            console.quiet = False  # --quiet holds for this invocation only (the app may be called again)


app = typer.Typer(
    cls=_ErrorHandlingGroup,
    name="plstitch",
    help="Load, evaluate and pretrain PL-Stitch and baseline encoders for procedural video.",
    rich_markup_mode="rich",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"plstitch {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks and debug logs.")] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", help="Only warnings and errors on stderr (no progress bars, logs or tables)."
        ),
    ] = False,
) -> None:
    """Load, evaluate and pretrain PL-Stitch and baseline encoders for procedural video."""
    setup_logging(logging.DEBUG if debug else logging.WARNING if quiet else logging.INFO, quiet=quiet)


def unwrap_help(text: str) -> str:
    """A command's help with each paragraph on one line, so that rich wraps it once, to the terminal's width.

    Why: Typer's rich mode keeps the line breaks of a docstring's later paragraphs (and of the first one in a
    group's command list) and then wraps each line again: a docstring wrapped at 110 columns reads as ragged
    short lines at 80. Kept as they are: a paragraph that starts with click's no-rewrap marker `\b`, and line
    breaks before list items (`- `, `* `, `1. `) and indented lines.
    """
    paragraphs = []
    for paragraph in inspect.cleandoc(text).split("\n\n"):
        if paragraph.startswith("\b"):
            paragraphs.append(paragraph)
            continue
        lines: list[str] = []
        for line in paragraph.splitlines():
            if lines and not _KEEPS_ITS_LINE.match(line):
                lines[-1] = f"{lines[-1].rstrip()} {line.strip()}"
            else:
                lines.append(line.rstrip())
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


_KEEPS_ITS_LINE = re.compile(r"\s|[-*] |\d+[.)] ")  # an indented line or a list item starts a new line


def _unwrap_command_help(typer_app: typer.Typer) -> None:
    """`unwrap_help` on the help of every command of `typer_app` and of its sub-apps (their docstrings, or
    the help they were registered with); the functions' own docstrings are left as they are."""
    for command in typer_app.registered_commands:
        text = command.help if command.help is not None else inspect.getdoc(command.callback)
        if text:
            command.help = unwrap_help(text)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _unwrap_command_help(group.typer_instance)


def _register_all() -> None:
    evaluation = (quickstart, hub, data, tasks, evaluate, temporal, predict, report, benchmark, analyze)
    for module in (*evaluation, train, frames, reproduce, publish):
        module.register(app)
    _unwrap_command_help(app)


_register_all()


def main(prog_name: str | None = None) -> None:
    """Entry point of the `plstitch` script and of `python -m plstitch_eval` (torchrun)."""
    app(prog_name=prog_name)
