"""CLI command `quickstart`: the whole toolkit offline in minutes (synthetic data, shipped tiny model).

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import DeviceOpt, json_opt, out_opt
from plstitch_eval.utils.outputs import OwnedFiles

QuickstartOutOpt = out_opt("Output folder (features/, results/, figures/).", owned=True)
# what `quickstart.run_quickstart` writes into --out: a folder holding anything else is refused (`.` included)
QUICKSTART_FILES = OwnedFiles("a quickstart folder", ("features", "results", "figures"))
RowsJsonOpt = json_opt(
    "Write every row of the table as JSON to this file; - prints it on stdout (table: stderr)."
)


def quickstart(
    out: QuickstartOutOpt = Path("plstitch-quickstart"),
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="Encoder spec (default: the shipped plstitch-tiny-synthetic model)."
        ),
    ] = None,
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare",
            help="Another encoder spec to compare the model with (repeatable), e.g. the initialisation a "
            "trained run started from: its own row and paired differences.",
        ),
    ] = None,
    device: DeviceOpt = "auto",
    no_reference: Annotated[
        bool,
        typer.Option(
            "--no-reference",
            help="Skip the random-init and raw-pixels reference rows (majority class stays).",
        ),
    ] = False,
    json_path: RowsJsonOpt = None,
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace features made earlier with another model.")
    ] = False,
) -> None:
    """Synthetic videos -> shipped tiny PL-Stitch -> features -> k-NN + linear probe -> table + figure.

    The table shows the model beside reference rows: the same architecture with random weights, raw pixels
    (8x8x3) and the majority class. Needs no network and no dataset; under 3 minutes on a 2-core CPU.
    Rerunning resumes.
    """
    from plstitch_eval.quickstart import QuickstartConfig, print_quickstart, run_quickstart
    from plstitch_eval.utils.io import write_json_output

    QUICKSTART_FILES.check(out, overwrite=False)  # never beside a user's files
    config = QuickstartConfig(
        out=out,
        model=model,
        compare=tuple(compare or ()),
        reference=not no_reference,
        device=device,
        overwrite=overwrite,
    )
    result = run_quickstart(config)
    to_stdout = json_path is not None and str(json_path) == "-"
    print_quickstart(result, table_on_stdout=not to_stdout)
    if json_path is not None:
        write_json_output(json_path, result.to_dict())


def register(app: typer.Typer) -> None:
    """Add `quickstart` to the top-level app."""
    app.command("quickstart")(quickstart)
