"""CLI command `quickstart`: the whole toolkit offline in minutes (synthetic data, shipped tiny model)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def quickstart(
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output folder (features/, results/, figures/).")
    ] = Path("plstitch-quickstart"),
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="Encoder spec (default: the shipped plstitch-tiny-synthetic model)."
        ),
    ] = None,
    device: Annotated[str, typer.Option("--device", help="auto, cpu or cuda[:N].")] = "auto",
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace features made earlier with another model.")
    ] = False,
) -> None:
    """Synthetic videos -> shipped tiny PL-Stitch -> features -> k-NN + linear probe -> table + figure.

    Needs no network and no dataset; under 3 minutes on a 2-core CPU. Rerunning resumes.
    """
    from plstitch_eval.quickstart import QuickstartConfig, print_quickstart, run_quickstart

    result = run_quickstart(QuickstartConfig(out=out, model=model, device=device, overwrite=overwrite))
    print_quickstart(result)


def register(app: typer.Typer) -> None:
    """Add `quickstart` to the top-level app."""
    app.command("quickstart")(quickstart)
