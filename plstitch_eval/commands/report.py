"""CLI command `report`: a predict output folder as one self-contained HTML case report and a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import dataset_opt, out_opt, root_opt

FoldersArg = Annotated[
    list[Path],
    typer.Argument(
        help="Folder(s) written by plstitch predict --out (several: one per probe, merged by video name).",
        show_default=False,
    ),
]
ReportOutOpt = out_opt(
    "HTML file to write, its figures' PNG beside it (same name); default DIR/report.html.",
    kind=Path | None,
    file=True,
)
ReportLabelsOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--labels",
        metavar="FILE",
        help="Ground truth, one file per video in the report's order (natural order of the names): "
        "Frame<TAB>Phase TSV (Cholec80) or one class name per line (MS-TCN), as predict reads them.",
    ),
]
ReportLabelsFpsOpt = Annotated[
    float | None,
    typer.Option(
        "--labels-fps",
        help="Rows per second of the --labels files (default: the frame rate of the video file the folder's "
        "summary JSON names).",
    ),
]
ReportDatasetOpt = dataset_opt("Ground truth from this dataset's annotations.", kind=str | None)
ReportRootOpt = root_opt("With --dataset: the dataset's folder.")
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help="Replace an earlier report (HTML and PNG).")]


def report(
    folders: FoldersArg,
    out: ReportOutOpt = None,
    labels: ReportLabelsOpt = None,
    labels_fps: ReportLabelsFpsOpt = None,
    dataset: ReportDatasetOpt = None,
    root: ReportRootOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Write a case report from a predict output folder, offline or live: one HTML file (no internet
    needed: figures embedded, no script) and a PNG of its figures.

    Per video: the phase ribbon (against the truth with --labels or --dataset), time per phase, the
    transitions, the remaining-time curve (rsd probe), minutes until each anticipated class (anticipation
    probe), tools over time, and for a live case latency p50/p99 and dropped frames (from the folder's
    summary JSON and --jsonl lines: predict --json DIR/summary.json --jsonl DIR/frames.jsonl). Prints what
    it wrote as JSON.
    """
    # imported when run: the report reads labels through the predict package (torch, PyAV, timm)
    from plstitch_eval.report import ReportRequest, write_report
    from plstitch_eval.utils.console import console
    from plstitch_eval.utils.io import write_json_output

    request = ReportRequest(
        folders=list(folders), out=out, labels=list(labels or []), labels_fps=labels_fps, dataset=dataset,
        root=root, overwrite=overwrite,
    )  # fmt: skip
    written = write_report(request)
    console.print(f"wrote {written['report']} and {written['png']}", highlight=False, soft_wrap=True)
    write_json_output("-", written)


def register(app: typer.Typer) -> None:
    """Add `plstitch report` to the app."""
    app.command("report")(report)
