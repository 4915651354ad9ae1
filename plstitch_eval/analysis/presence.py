"""A multi-label probe's presence over time as a heatmap: a row per label (darker: more likely present).

Why one module: `plstitch predict`'s per-video figure and `plstitch report`'s track draw the same picture; a
triplets probe has 100 labels, so both show only the `MAX_ROWS` labels whose probability peaks highest
(the CSV keeps every column) and say so in the title.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from plstitch_eval.analysis.style import new_figure
from plstitch_eval.analysis.timeline import segment_edges

MAX_ROWS = 24  # rows drawn at most: a triplets probe's 100 labels would make a 28-inch figure


def top_rows(values: np.ndarray, limit: int = MAX_ROWS) -> list[int]:
    """The rows of `values` [K, T] to draw: all when K <= `limit`, else the `limit` whose peak is highest
    (ties: the lower index), in label order."""
    count = len(values)
    if count <= limit:
        return list(range(count))
    peaks = np.nanmax(values, axis=1) if values.shape[1] else np.zeros(count)
    chosen = np.argsort(-np.nan_to_num(peaks, nan=-1.0), kind="stable")[:limit]
    return sorted(int(k) for k in chosen)


def presence_figure(
    title: str, frame_times: np.ndarray, names: Sequence[str], values: np.ndarray, width: float = 9.0
) -> plt.Figure:
    """Heatmap of `values` [K, T] (probabilities in [0, 1]) over `frame_times`, a row per label in `names`;
    more than `MAX_ROWS` labels: the highest-peaking ones, the title saying how many of how many."""
    values = np.asarray(values, np.float64).reshape(len(names), len(frame_times))
    rows = top_rows(values)
    shown = [str(names[k]) for k in rows]
    fig = new_figure(width, 0.9 + 0.28 * max(len(rows), 1))
    axes = fig.subplots(1, 1)
    edges = segment_edges(np.asarray(frame_times, np.float64))
    grid = values[rows] if rows else np.zeros((0, len(edges) - 1))
    mesh = axes.pcolormesh(edges, np.arange(len(rows) + 1), grid, cmap="Greys", vmin=0.0, vmax=1.0)
    axes.set_yticks(np.arange(len(rows)) + 0.5, shown)
    axes.invert_yaxis()
    axes.set_xlabel("time (s)")
    more = (
        f"\n{len(rows)} of {len(names)} labels shown: those peaking highest" if len(rows) < len(names) else ""
    )
    axes.set_title(f"{title}{more}", loc="left")
    fig.colorbar(mesh, ax=axes, label="presence", fraction=0.03, pad=0.01)
    fig.tight_layout()
    return fig
