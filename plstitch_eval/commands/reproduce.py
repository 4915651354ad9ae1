"""CLI command `reproduce`: train and evaluate each ablation row on the synthetic dataset, print tables.

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

import inspect
import signal
from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import default_of, device_opt, out_opt, output_opt
from plstitch_eval.utils.console import console, print_error
from plstitch_eval.utils.outputs import REPLACED_FOLDER, OwnedFiles
from plstitch_train.reproduce.presets import (
    REPRODUCE_PRESETS,
    ROWS,
    ReproduceConfig,
    ReproduceLayout,
    get_reproduce_preset,
)

# help texts list the registries themselves, so a new preset or row shows up without editing this file
PRESET_HELP = "Reproduction preset, one of those listed above."
ROW_HELP = "Only these rows (repeat): " + ", ".join(ROWS) + "."
ReproduceOutOpt = out_opt("Output folder (runs/, figures/, ablation.json/.md).", owned=True)
ExportBestOpt = output_opt(
    Path | None,
    "--export-best",
    help="Export the best seed of the preset's export row (PL-Stitch; synthetic-mim-init: the MIM "
    "initialisation) here (timm format + card).",
    target=REPLACED_FOLDER,
)
_LAYOUT = ReproduceLayout(Path("out"))
_NAMES = [p.name for p in (_LAYOUT.runs, _LAYOUT.frame_cache, _LAYOUT.references, _LAYOUT.figures)]
_TABLES = [p.name for p in (_LAYOUT.summary_json, _LAYOUT.summary_md)]
# what a reproduction writes into --out (`ReproduceLayout`): a folder holding anything else is refused
REPRODUCE_FILES = OwnedFiles(
    "a reproduction folder", (*_NAMES, *_TABLES, *(f".{name}.*.tmp" for name in _TABLES))
)
ReproduceDeviceOpt = device_opt(choices="cpu, cuda or cuda:N")  # its runs' devices: no auto


def presets_help() -> str:
    """One help paragraph per reproduce preset (rows, budget, seeds, start, time), from `REPRODUCE_PRESETS`.

    Why: the command description has the full terminal width, so no preset name is cut.
    """
    lines = []
    for preset in REPRODUCE_PRESETS.values():
        epochs = {ROWS[r].overrides.get("epochs", preset.train_overrides.get("epochs")) for r in preset.rows}
        steps = (
            f"{preset.steps} steps"
            if preset.steps
            else " / ".join(f"{e} epochs" for e in sorted(epochs))
            if None not in epochs
            else f"the {preset.train_preset} preset's epochs"
        )
        start = "its own random init" if preset.shared_init is None else preset.shared_init
        if start == "random":
            start = "the seed-0 random init"
        text = (
            f"{preset.name}: rows {', '.join(preset.rows)}"
            + (f" (+ time-reversed {', '.join(preset.awareness_rows)})" if preset.awareness_rows else "")
            + f"; {steps} per run, {preset.seeds} seed{'s' if preset.seeds != 1 else ''} per row, "
            f"starting from {start}" + (f"; {preset.minutes}" if preset.minutes else "") + "."
        )
        lines.append(text)
    return "Presets (--preset):\n\n" + "\n\n".join(lines)


def reproduce(
    preset: Annotated[str, typer.Option("--preset", help=PRESET_HELP)] = "synthetic",
    seeds: Annotated[
        int | None, typer.Option("--seeds", min=1, help="Seeds per row (default: the preset's).")
    ] = None,
    steps: Annotated[
        int | None, typer.Option("--steps", min=1, help="Optimizer steps per run (default: the preset's).")
    ] = None,
    out: ReproduceOutOpt = default_of(ReproduceConfig, "out"),
    rows: Annotated[list[str] | None, typer.Option("--row", help=ROW_HELP)] = None,
    awareness: Annotated[
        bool, typer.Option(help="Also train on time-reversed videos and draw the awareness violins.")
    ] = default_of(ReproduceConfig, "awareness"),
    device: ReproduceDeviceOpt = default_of(ReproduceConfig, "device"),
    jobs: Annotated[
        int | None,
        typer.Option(
            "--jobs",
            min=1,
            help="Runs trained at once, each in its own process with CPUs/jobs torch threads (default: the "
            "preset's; synthetic: 2, which trains 1.65x faster than 1 on a 2-core CPU).",
        ),
    ] = None,
    export_best: ExportBestOpt = None,
) -> None:
    """Train each ablation row (same budget, several seeds), evaluate with k-NN + linear, print mean ± std.

    Resumable: rerun the same command to skip finished runs and resume an interrupted one.
    """
    from plstitch_train.reproduce import export_best as run_export
    from plstitch_train.reproduce import reproduce as run_reproduce
    from plstitch_train.trainer import TrainingInterrupted

    config = ReproduceConfig(
        preset=get_reproduce_preset(preset),
        out=out,
        seeds=seeds,
        steps=steps,
        rows=rows,
        awareness=awareness,
        device=device,
        jobs=jobs,
    )
    check_outputs(out, export_best)  # the settings first; then nothing beside a user's files
    try:
        summary = run_reproduce(config)
    except TrainingInterrupted as stop:
        print_error(
            f"stopped by {signal.Signals(stop.signum).name} in {stop.run_dir}; rerun the same command to "
            "continue (finished runs are kept, the interrupted one resumes from its last checkpoint).",
            label="interrupted",
            style="yellow",
        )
        raise typer.Exit(code=stop.exit_code) from None
    typer.echo(summary["table_markdown"])
    for row, awareness in summary["awareness"].items():
        console.print(
            f"awareness ({row}): forward-vs-reversed minus same-direction cosine distance "
            f"{awareness['contrast']:+.4f}; figure {awareness['figure']}",
            highlight=False,
        )
    console.print(f"results: {out / 'ablation.json'}, {out / 'ablation.md'}", highlight=False)
    if export_best is not None:
        folder = run_export(summary, export_best, export_best.name)
        console.print(f"exported {summary['best_export_run']} to {folder}", highlight=False)


def check_outputs(out: Path, export_best: Path | None) -> None:
    """Refuse, before any training, an --out or --export-best folder holding a user's files (naming the
    first): the reproduction writes only its own, and `--export-best` replaces an export folder."""
    from plstitch_train.publishing.export import EXPORT_FILES

    REPRODUCE_FILES.check(out, overwrite=False)
    if export_best is not None:
        EXPORT_FILES.check(export_best, "--export-best", overwrite=False)


def register(app: typer.Typer) -> None:
    """Add `reproduce` to the top-level app."""
    app.command("reproduce", help=f"{inspect.getdoc(reproduce)}\n\n{presets_help()}")(reproduce)
