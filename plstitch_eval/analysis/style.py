"""Shared figure style: Okabe-Ito colour-blind-safe palette, Agg backend, atomic PNG + JSON outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless and deterministic; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402

from plstitch_eval.utils.io import atomic_path, write_json_atomic  # noqa: E402

DPI = 150
# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour-vision deficiencies.
OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)
# Beyond seven classes: Paul Tol's colour-blind-safe "muted" hues (the least Okabe-Ito-like first), then
# tab20/tab20b for large label sets (Breakfast has 48), repeated if needed.
TOL_MUTED = (
    "#882255",
    "#332288",
    "#999933",
    "#CC6677",
    "#44AA99",
    "#117733",
    "#AA4499",
    "#DDCC77",
    "#88CCEE",
)
_EXTRA = (
    tuple(to_rgb(c) for c in TOL_MUTED)
    + tuple(matplotlib.colormaps["tab20"].colors)
    + tuple(matplotlib.colormaps["tab20b"].colors)
)
WRONG = "#D55E00"  # vermillion marks errors (borders, labels)
ERROR_STRIP = "#000000"  # black marks wrong frames where class colours (vermillion included) fill the plot
RIGHT = "#009E73"  # bluish green marks agreement
UNLABELLED = "#BBBBBB"


def class_colors(n: int) -> list[tuple[float, float, float]]:
    """`n` RGB colours, the seven Okabe-Ito hues first, so class i always gets the same colour."""
    base = [to_rgb(c) for c in OKABE_ITO[:7]] + [tuple(c[:3]) for c in _EXTRA]  # black kept for markers
    return [base[i % len(base)] for i in range(n)]


def new_figure(width: float, height: float) -> tuple[plt.Figure, Any]:
    """A figure of `width` x `height` inches with the project style (white background, readable fonts)."""
    plt.rcParams.update(
        {
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.labelsize": 9,
            "legend.fontsize": 8,
            "figure.facecolor": "white",
            "axes.facecolor": "white",
            "svg.hashsalt": "plstitch",
        }
    )
    return plt.figure(figsize=(width, height))


def save_figure(fig: plt.Figure, path: str | Path, dpi: int = DPI) -> Path:
    """Write `fig` as PNG atomically (temp file, then rename) and close it; returns the path."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return path


def output_paths(out_dir: str | Path, name: str) -> tuple[Path, Path]:
    """`(out_dir/name.png, out_dir/name.json)`: each figure's numbers sit next to it."""
    out_dir = Path(out_dir)
    return out_dir / f"{name}.png", out_dir / f"{name}.json"


def write_outputs(fig: plt.Figure, data: dict[str, Any], out_dir: str | Path, name: str) -> tuple[Path, Path]:
    """Save the PNG and the JSON with the numbers behind it, both atomically."""
    png, js = output_paths(out_dir, name)
    save_figure(fig, png)
    write_json_atomic(js, {"figure": png.name, **data})
    return png, js
