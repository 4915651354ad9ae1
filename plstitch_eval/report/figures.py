"""The report's figures, drawn with matplotlib's Agg backend (`analysis.style`) as PNG bytes: per video the
phase ribbon (the truth above it and the wrong frames below when labelled), the remaining-time curve, the
minutes to each next phase, tools over time and the live latency; and all of them stacked into one PNG.
"""

from __future__ import annotations

import io

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.patches import Patch
from PIL import Image

from plstitch_eval.analysis.presence import presence_figure
from plstitch_eval.analysis.style import ERROR_STRIP, UNLABELLED, class_colors, new_figure
from plstitch_eval.analysis.timeline import segment_edges, segments
from plstitch_eval.report.case import (
    CVS,
    NEXT,
    REMAINING,
    TOOLS,
    TRIPLETS,
    CaseVideo,
    CurveTrack,
    LiveRecord,
    PhaseTrack,
)

WIDTH_IN = 9.0
PHASES, LATENCY = "phases", "latency"  # the figure keys beside the curve kinds (REMAINING, NEXT, TOOLS)


def draw_video(video: CaseVideo, dpi: int) -> dict[str, bytes]:
    """The figures of one video's sections, keyed by section (`PHASES`, `REMAINING`, `NEXT`, `TOOLS`,
    `LATENCY`), as PNG bytes; a section without data gets none."""
    figures = {}
    if video.phases is not None and len(video.phases.frame_times):
        figures[PHASES] = ribbon_figure(video.name, video.phases)
    draw = {REMAINING: remaining_figure, NEXT: next_figure, TOOLS: tools_figure}
    draw |= {TRIPLETS: tools_figure, CVS: tools_figure}  # presence per label, drawn as the tools
    for curve in video.curves:
        if len(curve.frame_times) and curve.kind not in figures:
            figures[curve.kind] = draw[curve.kind](video.name, curve)
    if video.live is not None and len(video.live.latency_s):
        figures[LATENCY] = latency_figure(video.name, video.live)
    return {key: png_bytes(fig, dpi) for key, fig in figures.items()}


def png_bytes(fig: plt.Figure, dpi: int) -> bytes:
    """The figure as PNG bytes (no timestamp: the same figure gives the same bytes); closes it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def stack_pngs(images: list[bytes]) -> bytes:
    """The figures one under the other on white, as one PNG (the report's figures beside the page)."""
    opened = [Image.open(io.BytesIO(data)).convert("RGB") for data in images]
    if not opened:
        opened = [Image.new("RGB", (int(WIDTH_IN * 50), 50), "white")]
    width = max(im.width for im in opened)
    sheet = Image.new("RGB", (width, sum(im.height for im in opened)), "white")
    top = 0
    for im in opened:
        sheet.paste(im, (0, top))
        top += im.height
    buffer = io.BytesIO()
    sheet.save(buffer, format="PNG")
    return buffer.getvalue()


def ribbon_figure(name: str, track: PhaseTrack) -> plt.Figure:
    """The predicted phases as a coloured ribbon over time; with labels the truth above and the wrong
    frames as a black strip below (as predict's timeline draws them)."""
    colors = class_colors(len(track.class_names))
    edges = segment_edges(track.frame_times)
    labelled = track.truth is not None
    fig = new_figure(WIDTH_IN, 2.0 if labelled else 1.5)
    axes = fig.subplots(1, 1)
    rows = [(2.0, track.truth, "truth"), (1.0, track.predicted, "predicted")] if labelled else []
    rows = rows or [(1.0, track.predicted, "predicted")]
    for y, ids, _ in rows:
        for s, e, c in segments(ids):
            color = UNLABELLED if c < 0 else colors[c]
            axes.broken_barh([(edges[s], edges[e] - edges[s])], (y - 0.4, 0.8), facecolors=color)
    ticks = [(y, label) for y, _, label in rows]
    if labelled:
        wrong = ((track.truth != track.predicted) & (track.truth >= 0)).astype(np.int64)
        for s, e, c in segments(wrong):
            if c:
                axes.broken_barh([(edges[s], edges[e] - edges[s])], (0.05, 0.3), facecolors=ERROR_STRIP)
        ticks.append((0.2, "wrong"))
    axes.set_yticks([y for y, _ in ticks], [label for _, label in ticks])
    axes.set_ylim(0.0 if labelled else 0.55, max(y for y, _ in ticks) + 0.45)
    axes.set_xlim(edges[0], edges[-1])
    axes.set_xlabel("time (s)")
    axes.set_title(f"{name}: phases", loc="left")
    shown = sorted({int(c) for _, ids, _ in rows for c in np.unique(ids) if c >= 0})
    handles = [Patch(color=colors[c], label=track.class_names[c]) for c in shown]
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def _curves(name: str, title: str, curve: CurveTrack, ylabel: str) -> tuple[plt.Figure, plt.Axes]:
    """A figure with one line per column of `curve` over time."""
    fig = new_figure(WIDTH_IN, 2.4)
    axes = fig.subplots(1, 1)
    colors = class_colors(max(len(curve.columns), 1))
    for k, (label, values) in enumerate(curve.columns.items()):
        axes.plot(curve.frame_times, values, color=colors[k], lw=1.4, label=label)
    axes.set_xlabel("time (s)")
    axes.set_ylabel(ylabel)
    axes.set_title(f"{name}: {title}", loc="left")
    end = float(curve.frame_times[-1]) if len(curve.frame_times) > 1 else float(curve.frame_times[0]) + 1.0
    axes.set_xlim(float(curve.frame_times[0]), end)
    return fig, axes


def remaining_figure(name: str, curve: CurveTrack) -> plt.Figure:
    """The predicted remaining minutes, the true ones dashed on a labelled case."""
    fig, axes = _curves(name, "remaining time", curve, "minutes")
    if curve.truth is not None:
        axes.plot(curve.frame_times, curve.truth, color="black", lw=1.0, ls="--", label="truth")
    axes.set_ylim(bottom=0.0)
    axes.legend(loc="upper right", frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def next_figure(name: str, curve: CurveTrack) -> plt.Figure:
    """The minutes to the next occurrence of each anticipated phase (flat at the horizon: out of reach)."""
    fig, axes = _curves(name, "minutes until each anticipated class", curve, "minutes")
    axes.set_ylim(bottom=0.0)
    axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize="small")
    fig.tight_layout()
    return fig


def tools_figure(name: str, curve: CurveTrack) -> plt.Figure:
    """Each tool's presence probability over time, a row per tool (darker: more likely present); a triplets
    or CVS curve likewise, a row per triplet or criterion (`analysis.presence`: at most its `MAX_ROWS`)."""
    tools = list(curve.columns)
    values = np.stack([curve.columns[t] for t in tools]) if tools else np.zeros((0, len(curve.frame_times)))
    return presence_figure(f"{name}: {curve.kind}", curve.frame_times, tools, values, WIDTH_IN)


def latency_figure(name: str, live: LiveRecord) -> plt.Figure:
    """Each frame's latency (decoded to predicted) over video time, its median and p99 as lines."""
    fig = new_figure(WIDTH_IN, 2.0)
    axes = fig.subplots(1, 1)
    latency_ms = live.latency_s * 1000.0
    axes.plot(live.frame_times, latency_ms, color=class_colors(1)[0], lw=1.0, marker=".", ms=3)
    for q, style in ((0.5, "-"), (0.99, "--")):
        value = live.latency_ms(q)
        axes.axhline(value, color="black", lw=0.8, ls=style, label=f"p{round(q * 100)} {value:.1f} ms")
    axes.set_ylim(bottom=0.0)
    axes.set_xlabel("time (s)")
    axes.set_ylabel("latency (ms)")
    axes.set_title(f"{name}: latency", loc="left")
    axes.legend(loc="upper right", frameon=False, fontsize="small")
    fig.tight_layout()
    return fig
