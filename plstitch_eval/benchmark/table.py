"""The benchmark's table: JSON (`plstitch.benchmark/v1`, one record per cell) and the paper-style markdown
with the paper's numbers beside ours, the failed cells named and the n/a ones (no labels of their task)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from plstitch_eval.benchmark.cells import NA, Cell
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.inputs import PHASES, PROTOCOL_LABELS
from plstitch_eval.benchmark.models import COLLECTIONS
from plstitch_eval.benchmark.paper import paper_numbers, paper_results
from plstitch_eval.tables import METRIC_LABELS

SCHEMA = "plstitch.benchmark/v1"
TABLE_MD, TABLE_JSON = "table.md", "table.json"


def benchmark_table(config: BenchmarkConfig, cells: Sequence[Cell]) -> dict[str, Any]:
    """The table as JSON (`plstitch.benchmark/v1`): columns, one record per cell (numbers, paper, error);
    no columns when `--tasks` leaves phases out (the regression tasks' block is `task_table.py`'s)."""
    columns = [
        {
            "dataset": dataset.name,
            "protocol": protocol,
            "task": config.task(protocol),
            "metric": metric,
            "header": " ".join(
                (dataset.name, PROTOCOL_LABELS[config.task(protocol)], METRIC_LABELS.get(metric, metric))
            ),
        }
        for dataset in config.datasets
        for protocol in config.protocols
        for metric in config.table_metrics(dataset, protocol)
        if PHASES in config.tasks
    ]
    records = []
    for cell in cells:
        done = cell.status == "done"
        records.append(
            {
                "model": cell.model,
                "model_dir": cell.model_dir,
                "dataset": cell.dataset.name,
                "adapter": cell.dataset.adapter,
                "protocol": cell.protocol,
                "task": config.task(cell.protocol),
                "fraction": cell.fraction,
                "status": cell.status,
                "resumed": cell.resumed,
                "error": cell.error,
                "reason": cell.reason,
                "features": str(cell.store),
                "results": str(cell.results_path) if done else None,
                "metrics": cell.metrics if done else {},
                "metrics_std": cell.metrics_std if done else {},
                "paper": paper_numbers(cell.model, cell.dataset.adapter or "", cell.protocol),
                "seconds": cell.seconds,
            }
        )
    missing = sorted(
        {m for c in COLLECTIONS.values() if set(c.available()) & set(config.models) for m in c.missing}
    )
    failed = [r for r in records if r["status"] == "failed"]
    unlabelled = [r for r in records if r["status"] == NA]
    return {
        "schema": SCHEMA,
        "out": str(config.out),
        "models": list(config.models),
        "datasets": [{**d.settings(), "root": str(d.root) if d.root else None} for d in config.datasets],
        "protocols": list(config.protocols),
        "fractions": list(config.fractions),  # the share of the training videos of each cell (1: all)
        "fraction_seeds": list(config.fraction_seeds),
        "columns": columns,
        "cells": records,
        "ok": not failed,
        "failed": [{k: r[k] for k in ("model", "dataset", "protocol", "error")} for r in failed],
        "not_applicable": [{k: r[k] for k in ("model", "dataset", "protocol", "reason")} for r in unlabelled],
        "paper": {
            "source": paper_results().get("source"),
            "methods_without_a_loadable_checkpoint": missing,
        },
    }


def table_markdown(table: dict[str, Any]) -> str:
    """The table in markdown: ours with the paper's number in parentheses; failed cells listed with errors.

    With `--fractions`, the cells at the largest fraction (the whole training split when 1 is among them);
    the label-efficiency tables show every fraction (`label_efficiency.py`).
    """
    columns, by_key = table["columns"], {}
    main = max(table.get("fractions") or [1.0])
    shown = [r for r in table["cells"] if r.get("fraction", 1.0) == main]
    for record in shown:
        by_key[(record["model"], record["dataset"], record["protocol"])] = record
    best = {}
    for i, col in enumerate(columns):
        values = [
            r["metrics"].get(col["metric"])
            for r in shown
            if (r["dataset"], r["protocol"]) == (col["dataset"], col["protocol"]) and r["status"] == "done"
        ]
        values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
        best[i] = max(values) if len(values) > 1 else None
    lines = [
        "| Model | " + " | ".join(_md(c["header"]) for c in columns) + " |",
        "| --- |" + " ---: |" * len(columns),
    ]
    any_paper = other_checkpoint = False
    for model in table["models"]:
        cells = []
        for i, col in enumerate(columns):
            record = by_key.get((model, col["dataset"], col["protocol"]))
            if record is None:
                cells.append("-")
                continue
            if record["status"] != "done":
                cells.append(record["status"] if record["status"] in ("failed", NA) else "-")
                continue
            value = record["metrics"].get(col["metric"])
            text = format_value(value, record["metrics_std"].get(col["metric"]))
            if best[i] is not None and value == best[i]:
                text = f"**{text}**"
            paper = (record.get("paper") or {}).get("metrics", {}).get(col["metric"])
            if paper is not None:
                any_paper = True
                mark = "" if record["paper"]["same_checkpoint"] else "†"
                other_checkpoint = other_checkpoint or bool(mark)
                text += f" ({paper:.1f}{mark})"
            cells.append(text)
        lines.append(f"| {_md(model)} | " + " | ".join(cells) + " |")
    notes = ["", "Ours in % on each dataset's test split; the best of a column in bold."]
    if main < 1:
        notes.append(
            f"Trained on {main:g} of the training videos: mean ± std over the subset seeds "
            f"{', '.join(str(s) for s in table.get('fraction_seeds') or [])}."
        )
    if any_paper:
        notes.append(
            "(x) = reported by the PL-Stitch paper (CVPR 2026, Tables 1-2) for this checkpoint on this "
            "dataset"
            + (
                "; (x†) = reported for the same method pretrained by the paper's authors on other data, "
                "not for this checkpoint."
                if other_checkpoint
                else "."
            )
        )
    missing = table["paper"]["methods_without_a_loadable_checkpoint"]
    if missing:
        notes.append(f"The paper also reports {', '.join(missing)}: no loadable checkpoint in plstitch.")
    reasons = dict.fromkeys(r["reason"] for r in table.get("not_applicable") or [] if "task" not in r)
    if reasons:
        notes.append(f"n/a: not run, the dataset has no labels for it ({'; '.join(map(str, reasons))}).")
    failed = table["failed"]
    if failed:
        groups: dict[tuple[str, str, str], list[str]] = {}  # one row per (model, dataset, error)
        for f in failed:
            groups.setdefault((f["model"], f["dataset"], f["error"] or ""), []).append(f["protocol"])
        notes += ["", f"Failed cells ({len(failed)}; rerun the same command to retry them):", ""]
        notes += ["| Model | Dataset | Protocols | Error |", "| --- | --- | --- | --- |"]
        notes += [
            f"| {_md(model)} | {_md(dataset)} | {', '.join(protocols)} | {_md(error)} |"
            for (model, dataset, error), protocols in groups.items()
        ]
    return "\n".join(lines + notes) + "\n"


def _md(text: str) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def format_value(value: Any, std: Any = None) -> str:
    """A number as the table shows it (`81.7`, `81.7 ± 1.2`); `-` for none or not finite."""
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    return f"{value:.1f}" if std is None or not math.isfinite(std) else f"{value:.1f} ± {std:.1f}"
