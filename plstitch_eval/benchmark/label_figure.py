"""The label-efficiency figure: each metric against the share of the training videos, one line per encoder,
a band of ± one std over the subset seeds (`label_efficiency.py` computes the numbers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.analysis.style import OKABE_ITO, new_figure, save_figure
from plstitch_eval.protocols.fractions import fraction_label
from plstitch_eval.tables import METRIC_LABELS

__all__ = ["plot_label_efficiency"]


def plot_label_efficiency(data: dict[str, Any], path: Path) -> Path:
    """One panel per (dataset, protocol) (rows) x metric (columns) of `data` (`label_efficiency`'s JSON); the
    x axis in powers of two (1/8, 1/4, 1/2, all), so the doublings of labels are evenly spaced."""
    rows = len(data["groups"])  # one row per (dataset, protocol), one column per metric
    cols = max((len(g["metrics"]) for g in data["groups"]), default=1)
    panels = [
        (r * cols + c, g, metric)
        for r, g in enumerate(data["groups"])
        for c, metric in enumerate(g["metrics"])
    ]
    fig = new_figure(3.4 * cols, 2.6 * rows + 0.6)
    fractions = data["fractions"]
    for index, group, metric in panels:
        ax = fig.add_subplot(rows, cols, index + 1)
        for m, model in enumerate(data["models"]):
            points = sorted(
                (c["fraction"], c["metrics"].get(metric), c["metrics_std"].get(metric) or 0.0)
                for c in data["curves"]
                if (c["model"], c["dataset"], c["protocol"]) == (model, group["dataset"], group["protocol"])
                and c["status"] == "done"
                and c["metrics"].get(metric) is not None
            )
            if not points:
                continue
            x, y, s = (np.array(v, dtype=float) for v in zip(*points, strict=True))
            color = OKABE_ITO[m % len(OKABE_ITO)]
            ax.plot(x, y, marker="o", color=color, label=model, linewidth=1.5, markersize=4)
            ax.fill_between(x, y - s, y + s, color=color, alpha=0.18, linewidth=0)
        ax.set_xscale("log", base=2)
        ax.set_xticks(fractions)
        ax.set_xticklabels([fraction_label(f) for f in fractions])
        ax.minorticks_off()
        ax.set_xlabel("share of the training videos")
        ax.set_ylabel(f"{METRIC_LABELS.get(metric, metric)} (%)")
        ax.set_title(f"{group['dataset']} · {group['label']}")
        ax.grid(alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels() if fig.axes else ([], [])
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), frameon=False)
    seeds = len(data["seeds"])
    fig.suptitle(f"Label efficiency (mean ± std over {seeds} subset seed{'' if seeds == 1 else 's'})")
    fig.tight_layout(rect=(0, 0.08 if handles else 0, 1, 0.95))
    return save_figure(fig, path)
