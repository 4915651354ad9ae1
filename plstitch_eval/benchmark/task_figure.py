"""The tasks' figure (`<out>/tasks.png`): per (task, dataset, protocol) section the headline metric of each
model as a bar with ± one std over the seeds, the reference rows as horizontal lines (`task_table.py`
computes the numbers; a section names its headline, unit and which way is better)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from plstitch_eval.analysis.style import OKABE_ITO, new_figure, save_figure

__all__ = ["plot_tasks"]

COLUMNS = 3  # panels per row
REFERENCE_STYLES = ("--", ":", "-.")


def _value(row: dict[str, Any], key: str, metric: str) -> float:
    value = row[key].get(metric)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def plot_tasks(block: dict[str, Any], path: Path) -> Path:
    """One panel per section of `block` (`task_table.tasks_block`), at most three a row: its headline metric
    per model (phase_wMAE, MAE in minutes; mAP_IVT, mAP; Spearman's rho), its direction in the axis label."""
    sections = [s for s in block["sections"] if not s.get("not_applicable")]  # n/a: nothing to draw
    cols = max(1, min(COLUMNS, len(sections)))
    rows = max(1, math.ceil(len(sections) / cols))
    fig = new_figure(3.6 * cols, 3.0 * rows + 0.5)
    for index, section in enumerate(sections):
        ax = fig.add_subplot(rows, cols, index + 1)
        metric = section.get("headline") or section["metrics"][0]
        models = [r for r in section["rows"] if r["kind"] == "model"]
        x = list(range(len(models)))
        means = [_value(r, "metrics", metric) for r in models]
        errors = [0.0 if math.isnan(s) else s for s in (_value(r, "metrics_std", metric) for r in models)]
        colors = [OKABE_ITO[i % len(OKABE_ITO)] for i in x]
        ax.bar(x, means, yerr=errors, color=colors, capsize=3, width=0.6)
        references = [r for r in section["rows"] if r["kind"] == "reference"]
        drawn = [r for r in references if not math.isnan(_value(r, "metrics", metric))]  # rho: not all
        for i, ref in enumerate(drawn):
            style = REFERENCE_STYLES[i % len(REFERENCE_STYLES)]
            value = _value(ref, "metrics", metric)
            ax.axhline(value, color="#555555", linestyle=style, linewidth=1.2, label=ref["row"])
        ax.set_xticks(x)
        ax.set_xticklabels([r["row"] for r in models], rotation=20, ha="right", fontsize=7)
        lower = section.get("lower_is_better", {}).get(metric, True)
        unit = section.get("unit", "min")
        ax.set_ylabel(f"{metric}{f' ({unit})' if unit else ''}, {'lower' if lower else 'higher'} is better")
        ax.set_title(f"{section['task']} · {section['dataset']} · {section['label']}")
        ax.grid(axis="y", alpha=0.3)
        if drawn:
            ax.legend(loc="best", fontsize=7, framealpha=0.85)
    seeds = len(block["seeds"])
    plural = "" if seeds == 1 else "s"
    fig.suptitle(f"Mean ± std over {seeds} seed{plural}; lines: reference rows", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return save_figure(fig, path)
