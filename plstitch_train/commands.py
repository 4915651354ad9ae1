"""CLI commands of the training package: train, reproduce, export, push-to-hub."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add the training and publishing commands to the top-level app."""
    from plstitch_train import cli_publish, cli_reproduce, cli_train

    cli_train.register(app)
    cli_reproduce.register(app)
    cli_publish.register(app)
