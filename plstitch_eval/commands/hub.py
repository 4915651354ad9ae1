"""CLI commands for the hub: `plstitch models` (registry table), `plstitch download NAME` (an encoder, or a
published probe with its pinned backbone) and `plstitch probes` (published probes in the cache).

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from plstitch_eval.commands.options import json_opt
from plstitch_eval.registry import SHIPPED_PACKAGE
from plstitch_eval.utils.console import console, result_console
from plstitch_eval.utils.io import write_json_output

RegistryJsonOpt = json_opt(
    "Write the registry as JSON to this file; - prints it on stdout instead of the table."
)
ProbesJsonOpt = json_opt("Write the list as JSON to this file; - prints it on stdout instead of the table.")


def models(
    json_path: RegistryJsonOpt = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="Hugging Face cache to check (default: HF_HUB_CACHE)."),
    ] = None,
) -> None:
    """List the named encoders: architecture, feature dim, source, license and whether they are cached.

    Non-commercial licences are marked (and listed under the table); gated Hub repos need the licence accepted
    on the model's Hub page and HF_TOKEN set before `plstitch download`.
    """
    from plstitch_eval.hub.download import entry_cached
    from plstitch_eval.hub.registry import MODELS, list_models

    rows = [
        {
            "name": entry.name,
            "package": MODELS.package(entry.name),
            "architecture": entry.architecture,
            "feature_dim": entry.feature_dim,
            "source": entry.source,
            "license": entry.license,
            "non_commercial": entry.non_commercial,
            "gated": entry.gated,
            "license_source": entry.license_source,
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
        # names stay whole (they are what users type); long sources and licences wrap, never cut
        table.add_column(
            column,
            justify="right" if column == "feature dim" else "left",
            no_wrap=column == "name",
            overflow="fold",
        )
    for row in rows:
        table.add_row(
            _name_cell(row),
            Text(row["architecture"]),
            str(row["feature_dim"]),
            Text(row["source"] + (" (gated)" if row["gated"] else "")),
            _license_cell(row),
            Text("yes", style="green") if row["cached"] else "no",
        )
    out = result_console(width=max(console.width, 140))
    if not out.is_terminal:  # a file or pipe: as wide as the table, so that no source is folded
        natural = out.measure(table, options=out.options.update_width(10_000)).maximum
        out = result_console(width=max(out.width, natural))
    out.print(table)
    for line in _license_notes(rows):
        out.print(Text(line), soft_wrap=True)  # one line each, for grep; terminals wrap it


def _name_cell(row: dict) -> Text:
    """The name, and the package it comes from when that is not plstitch (an installed plugin)."""
    if row["package"] == SHIPPED_PACKAGE:
        return Text(row["name"])
    return Text.assemble(row["name"], (f" ({row['package']})", "dim"))


def _license_cell(row: dict) -> Text:
    """The licence, with non-commercial ones marked so that they cannot be missed."""
    if row["non_commercial"]:
        return Text.assemble(row["license"], (" non-commercial", "bold yellow"))
    return Text(row["license"])


def _license_notes(rows: list[dict]) -> list[str]:
    """Lines under the table: which weights are non-commercial, which repos are gated (and what to do)."""
    notes = []
    non_commercial = [row["name"] for row in rows if row["non_commercial"]]
    if non_commercial:
        notes.append(
            "Non-commercial licences (no commercial use; `plstitch models --json -` gives each "
            f"license_source): {', '.join(non_commercial)}."
        )
    gated = [row["name"] for row in rows if row["gated"]]
    if gated:
        notes.append(
            f"Gated Hub repos ({', '.join(gated)}): accept the licence on the model's Hub page, then set "
            "HF_TOKEN before `plstitch download`."
        )
    return notes


def download(
    name: Annotated[
        str,
        typer.Argument(
            help="Registry name (see `plstitch models`), hf-hub:ORG/NAME\\[/FILE], or a published probe "
            "hf-hub:ORG/NAME (its head and pinned backbone)."
        ),
    ],
    revision: Annotated[str | None, typer.Option("--revision", help="Branch, tag or commit.")] = None,
    cache_dir: Annotated[
        Path | None, typer.Option("--cache-dir", help="Hugging Face cache dir (default: HF_HUB_CACHE).")
    ] = None,
) -> None:
    """Fetch a model's weights, or a published probe and its pinned backbone, into the Hugging Face cache so
    that it later loads offline (a probe's backbone is checked against its pinned sha256).

    A model whose weights are already on this machine (shipped with plstitch, or at the path its environment
    variable names) or that has none (built in) needs no download: the command says so and exits 0.
    """
    from plstitch_eval.hub.download import download_model, local_weights
    from plstitch_eval.probes.hub import download_probe, is_hub_probe

    probe_files = download_probe(name, revision=revision, cache_dir=cache_dir) if is_hub_probe(name) else None
    if probe_files is not None:  # a published probe: its head, card and pinned backbone, verified
        _print_downloaded(name, probe_files)
        return
    local = local_weights(name)
    if local is not None:
        where = f"its weights are at {local[0]}" if local else "it is built in (no weights)"
        console.print(
            Text.assemble(("ready", "green"), f" {name} is already usable: {where}; nothing to download."),
            soft_wrap=True,
        )
        typer.echo(json.dumps({"name": name, "files": [str(path) for path in local], "commit": None}))
        return
    _print_downloaded(name, download_model(name, revision=revision, cache_dir=cache_dir))


def _print_downloaded(name: str, files: list) -> None:
    """One stderr line per cached file, then the JSON record on stdout."""
    for hub_file in files:
        console.print(
            Text.assemble(("cached", "green"), f" {hub_file.repo_id}/{hub_file.filename} @ {hub_file.commit}")
        )
    record = {
        "name": name,
        "files": [str(f.path) for f in files],
        "commit": files[0].commit if files else None,
    }
    typer.echo(json.dumps(record))


def probes(
    json_path: ProbesJsonOpt = None,
    cache_dir: Annotated[
        Path | None,
        typer.Option("--cache-dir", help="Hugging Face cache to list (default: HF_HUB_CACHE)."),
    ] = None,
) -> None:
    """List the published probes in the Hugging Face cache: kind, classes, backbone, headline metrics.

    Each runs offline with `plstitch predict --probe hf-hub:ORG/NAME`; a backbone marked not cached is
    fetched (and verified) by `plstitch download hf-hub:ORG/NAME`.
    """
    from plstitch_eval.probes.hub import cached_probes

    rows = cached_probes(cache_dir)
    if json_path is not None:
        write_json_output(json_path, rows)
        if str(json_path) == "-":
            return
    table = Table(title="published probes in the Hugging Face cache")
    for column in ("probe", "commit", "kind", "classes", "backbone", "cached?", "metrics"):
        table.add_column(column, no_wrap=column == "probe", overflow="fold")
    for row in rows:
        table.add_row(
            Text(row["probe"]),
            Text(row["commit"][:12] + (f" ({', '.join(row['refs'])})" if row["refs"] else "")),
            Text(f"{row['kind']}{'' if row['causal'] else ' (not causal)'}{', onnx' if row['onnx'] else ''}"),
            Text(f"{len(row['classes'] or [])}: {', '.join(row['classes'] or [])}"),
            Text(str(row["backbone"])),
            Text("yes", style="green") if row["backbone_cached"] else "no",
            Text(", ".join(f"{k} {v:.1f}" for k, v in row["metrics"].items()) or "-"),
        )
    result_console(width=max(console.width, 140)).print(table)
    if not rows:
        console.print(
            "No published probe is cached; fetch one with `plstitch download hf-hub:ORG/NAME`.",
            soft_wrap=True,
        )


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("models")(models)
    app.command("download")(download)
    app.command("probes")(probes)
