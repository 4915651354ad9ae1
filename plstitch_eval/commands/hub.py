"""CLI commands for the encoder hub: `plstitch models` (registry table) and `plstitch download NAME`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from plstitch_eval.utils.console import console, result_console
from plstitch_eval.utils.io import write_json_output


def models(
    json_path: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Write the registry as JSON to this file; - prints it on stdout instead of the table.",
            dir_okay=False,
        ),
    ] = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="Hugging Face cache to check (default: HF_HUB_CACHE)."),
    ] = None,
) -> None:
    """List the named encoders: architecture, feature dim, source, license and whether they are cached."""
    from plstitch_eval.hub.download import entry_cached
    from plstitch_eval.hub.registry import list_models

    rows = [
        {
            "name": entry.name,
            "architecture": entry.architecture,
            "feature_dim": entry.feature_dim,
            "source": entry.source,
            "license": entry.license,
            "cached": entry_cached(entry, cache_dir),
        }
        for entry in list_models()
    ]
    if json_path is not None:
        write_json_output(json_path, rows)
        if str(json_path) == "-":
            return
    table = Table(title="plstitch encoders")
    for column in ("name", "architecture", "feature dim", "source", "license", "cached?"):
        table.add_column(column, justify="right" if column == "feature dim" else "left")
    for row in rows:
        table.add_row(
            row["name"],
            row["architecture"],
            str(row["feature_dim"]),
            row["source"],
            row["license"],
            Text("yes", style="green") if row["cached"] else "no",
        )
    result_console(width=max(console.width, 140)).print(table)


def download(
    name: Annotated[
        str, typer.Argument(help="Registry name (see `plstitch models`) or hf-hub:ORG/NAME\\[/FILE].")
    ],
    revision: Annotated[str | None, typer.Option("--revision", help="Branch, tag or commit.")] = None,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="Hugging Face cache dir (default: HF_HUB_CACHE).")
    ] = None,
) -> None:
    """Fetch a model's weights into the Hugging Face cache so it later loads offline."""
    from plstitch_eval.hub.download import download_model

    files = download_model(name, revision=revision, cache_dir=cache_dir)
    for hub_file in files:
        console.print(
            Text.assemble(("cached", "green"), f" {hub_file.repo_id}/{hub_file.filename} @ {hub_file.commit}")
        )
    typer.echo(
        json.dumps(
            {
                "name": name,
                "files": [str(f.path) for f in files],
                "commit": files[0].commit if files else None,
            }
        )
    )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("models")(models)
    app.command("download")(download)
