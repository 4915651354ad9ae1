"""`python -m plstitch_train ...` runs the `train` command (entry point of `torchrun -m plstitch_train`)."""

from __future__ import annotations

import logging
import os
import sys

import typer

from plstitch_eval.errors import PlstitchError
from plstitch_eval.utils.console import print_error, setup_logging
from plstitch_train import cli_train


def main() -> None:
    """Run `train` with our one-red-line error handling (PLSTITCH_DEBUG=1 shows tracebacks)."""
    setup_logging(logging.DEBUG if os.environ.get("PLSTITCH_DEBUG") else logging.INFO)
    app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
    cli_train.register(app)
    try:
        app()
    except PlstitchError as exc:
        if os.environ.get("PLSTITCH_DEBUG"):
            raise
        print_error(exc)
        sys.exit(1)


if __name__ == "__main__":
    main()
