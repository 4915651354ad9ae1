"""`plstitch benchmark --out OUT --status`: how each cell of a `--executor slurm` run stands - done, queued,
running, failed (with why), n/a (its dataset has no labels of its task) or missing - from the jobs record,
the cells' results files and Slurm; as JSON on stdout and a short table on stderr."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.cells import NA, SLURM_DIR
from plstitch_eval.benchmark.slurm_cells import JOBS_FILE, cell_statuses, read_records
from plstitch_eval.cluster import import_submitit
from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import console
from plstitch_eval.utils.io import write_json_output

__all__ = ["STATUS_SCHEMA", "benchmark_status", "print_benchmark_status", "status_lines"]

STATUS_SCHEMA = "plstitch.benchmark-status/v1"
STATUS_ORDER = ("done", "running", "queued", "failed", NA, "missing")


def benchmark_status(out: Path) -> dict[str, Any]:
    """The status report of the Slurm run in `out`: one record per cell (key, name, status, job id, Slurm
    state, error, log) and the count of each status."""
    import_submitit()
    out = Path(out).expanduser()
    records = read_records(out)
    if not records:
        raise ConfigError(
            f"{out / SLURM_DIR / JOBS_FILE} does not exist: {out} holds no `--executor slurm` run "
            "(run `plstitch benchmark ... --executor slurm` first)."
        )
    statuses = list(cell_statuses(out, records).values())
    counts = Counter(s.status for s in statuses)
    return {
        "schema": STATUS_SCHEMA,
        "out": str(out),
        "counts": {name: counts[name] for name in STATUS_ORDER if counts[name]},
        "finished": not (counts["queued"] or counts["running"]),
        "cells": [asdict(s) for s in statuses],
    }


def status_lines(report: dict[str, Any]) -> str:
    """The report as a short table: status, job, cell (and why it failed or is n/a), then the counts."""
    rows = [("status", "job", "cell")]
    rows += [(c["status"], c["job_id"] or "-", c["name"]) for c in report["cells"]]
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"{row[0]:<{width[0]}}  {row[1]:<{width[1]}}  {row[2]}" for row in rows]
    for i, cell in enumerate(report["cells"], start=1):
        if cell["status"] in ("failed", NA) and cell["error"]:
            lines[i] += f": {cell['error']}"
    counts = ", ".join(f"{n} {name}" for name, n in report["counts"].items())
    return "\n".join([*lines, "", f"{len(report['cells'])} cell(s): {counts}"])


def print_benchmark_status(out: Path) -> int:
    """Print the status of the run in `out`: JSON on stdout, the table on stderr; exit code 0."""
    report = benchmark_status(out)
    write_json_output("-", report)
    console.print(status_lines(report), highlight=False, soft_wrap=True)
    return 0
