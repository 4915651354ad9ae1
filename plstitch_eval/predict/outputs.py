"""What a predict run writes per video: `VideoPrediction` (the probe's outputs on one video and its JSON
summary), `<video>.csv` (time, frame, predicted class, a probability per class, progression; a regression
probe's minutes instead of the classes) and the timeline figure `<video>.png`; `check_outputs` refuses an
`--out` that would overwrite files.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.patches import Patch

from plstitch_eval.analysis.presence import presence_figure
from plstitch_eval.analysis.style import ERROR_STRIP, UNLABELLED, class_colors, new_figure, save_figure
from plstitch_eval.analysis.timeline import segment_edges, segments
from plstitch_eval.errors import ConfigError
from plstitch_eval.metrics.remaining import remaining_targets
from plstitch_eval.predict.heads import FIXED_COLUMNS, PROGRESSION_COLUMN, probability_columns
from plstitch_eval.predict.out_jsonl import JsonLines, check_jsonl_target  # noqa: F401 - their old home
from plstitch_eval.probes import Probe
from plstitch_eval.probes.probe import PRESENT_FIELD
from plstitch_eval.utils.io import write_text_atomic
from plstitch_eval.utils.outputs import check_output_path

__all__ = ["FIXED_COLUMNS", "PROGRESSION_COLUMN", "probability_columns"]  # re-exported from `heads`


def output_paths(out: str | Path, name: str) -> tuple[Path, Path]:
    """(`OUT/<name>.csv`, `OUT/<name>.png`)."""
    out = Path(out)
    return out / f"{name}.csv", out / f"{name}.png"


def case_paths(out: str | Path, name: str, prefixes: Sequence[str] = ()) -> tuple[Path, ...]:
    """A video's files: `output_paths`, or with several probes' `prefixes` the CSV and one figure per probe
    (`OUT/<name>.<prefix>.png`)."""
    csv_path, png_path = output_paths(out, name)
    if not prefixes:
        return csv_path, png_path
    return (csv_path, *(Path(out) / f"{name}.{prefix}.png" for prefix in prefixes))


def check_outputs(
    out: str | Path, names: Sequence[str], overwrite: bool, prefixes: Sequence[str] = ()
) -> None:
    """Refuse an `--out` that is a file, and existing output files (`case_paths`) unless `overwrite` (checked
    before any model loads)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; --out must be a folder (new or existing).")
    check_output_path(out, "--out")  # not under a regular file
    if overwrite:
        return
    existing = [str(p) for name in names for p in case_paths(out, name, prefixes) if p.exists()]
    if existing:
        more = f" (and {len(existing) - 1} more)" if len(existing) > 1 else ""
        raise ConfigError(
            f"{existing[0]}{more} exists; pass --overwrite to replace, or choose another --out."
        )


@dataclass
class VideoPrediction:
    """The probe's outputs on one video: per sampled frame its time, class probabilities [T, C], predicted
    class, progression (None without a temporal head) and ground truth (None without labels); the black-margin
    box cut from its frames (None: the probe's features were not cropped) and, online, how the video ended
    (`online.END_OF_RECORDING`, `online.quiet_for`, `online.INTERRUPTED`, `online.TERMINATED`)."""

    video: str
    source: str
    frame_times: np.ndarray
    probabilities: np.ndarray
    predicted: np.ndarray
    progression: np.ndarray | None = None
    labels: np.ndarray | None = None
    wall_seconds: float = 0.0
    files: dict[str, str] = field(default_factory=dict)
    black_margin: dict[str, float] | None = None
    ended: str | None = None
    frame_indices: np.ndarray | None = None  # sample number of each row (None: 0, 1, ...); online drops skip
    live: dict[str, Any] | None = None  # a live source: how it was opened, its clock, dropped frames, gaps
    values: np.ndarray | None = None  # a regression probe's minutes [T, K] (no classes then)
    columns: list[str] | None = None  # their CSV / JSONL columns (``remaining_min``, ``next_<class>_min``)
    task: str | None = None  # the regression probe's task (``rsd``: truth = each frame's time to the end)
    present: list[str] | None = None  # a multi-label probe's labels above threshold per frame, `;`-joined

    @property
    def truth_minutes(self) -> np.ndarray | None:
        """The remaining minutes of a labelled (so complete) case under an rsd probe: frame to video end."""
        if self.task != "rsd" or self.labels is None or not self.frames:
            return None
        return remaining_targets(self.frame_times)

    @property
    def frames(self) -> int:
        return len(self.frame_times)

    @property
    def last_time(self) -> float:
        """The time of the last frame seen (0 before the first)."""
        return float(self.frame_times[-1]) if self.frames else 0.0

    def summary(self, class_names: Sequence[str]) -> dict[str, Any]:
        """JSON-ready per-video summary: frames, seconds covered, how it ended (online), class share,
        segments, the black-margin box, files (and accuracy against the ground truth when there is one)."""
        edges = segment_edges(self.frame_times)
        if self.values is not None:
            return self._summary_of_minutes(edges)
        counts = np.bincount(self.predicted, minlength=len(class_names)) if self.frames else []
        out: dict[str, Any] = {
            **self._frame_fields(edges),
            "class_share": {
                name: float(counts[i] / self.frames) for i, name in enumerate(class_names) if counts[i]
            },
            "segments": [
                {
                    "class": class_names[c],
                    "start_s": round(float(edges[s]), 6),
                    "end_s": round(float(edges[e]), 6),
                    "frames": e - s,
                }
                for s, e, c in segments(self.predicted)
            ],
        }
        if self.labels is not None:
            labelled = self.labels >= 0
            correct = (self.predicted == self.labels)[labelled]
            out["accuracy"] = float(correct.mean() * 100) if correct.size else None
            out["labelled_frames"] = int(labelled.sum())
        return self._finished(out)

    def _frame_fields(self, edges: np.ndarray) -> dict[str, Any]:
        """The summary's first fields, whatever the probe: the video, its frames and time, how it ended."""
        return {
            "video": self.video,
            "source": self.source,
            "frames": self.frames,
            "seconds": round(float(edges[-1] - edges[0]), 6) if self.frames else 0.0,
            "wall_seconds": self.wall_seconds,
            **({} if self.ended is None else {"ended": self.ended, "last_time_s": round(self.last_time, 6)}),
        }

    def _finished(self, out: dict[str, Any]) -> dict[str, Any]:
        """The summary's last fields, whatever the probe: the black-margin box, the live record, the files."""
        out["black_margin"] = None if self.black_margin is None else dict(self.black_margin)
        if self.live is not None:
            out["live"] = dict(self.live)
        out["files"] = dict(self.files)
        return out

    def _summary_of_minutes(self, edges: np.ndarray) -> dict[str, Any]:
        """A regression probe's summary: first and last frame's minutes per column, and the MAE against the
        truth where it is known (`truth_minutes`)."""
        columns = list(self.columns or [])
        if self.present is not None:  # a multi-label probe: the share of frames each label is present in
            shown = [label for text in self.present for label in text.split(";") if label]
            share = {label: shown.count(label) / self.frames for label in dict.fromkeys(shown)}
            return self._finished({**self._frame_fields(edges), "present_share": share})
        out: dict[str, Any] = {
            **self._frame_fields(edges),
            "first_min": dict(zip(columns, map(float, self.values[0]), strict=True)) if self.frames else {},
            "last_min": dict(zip(columns, map(float, self.values[-1]), strict=True)) if self.frames else {},
        }
        truth = self.truth_minutes
        if truth is not None:
            out["MAE_min"] = float(np.mean(np.abs(self.values[:, 0] - truth)))
        return self._finished(out)


def csv_text(prediction: VideoPrediction, class_names: Sequence[str]) -> str:
    """The per-frame CSV: time_s, frame_index (sample number at the probe's fps), predicted class name, a
    probability per class (shortest repr: reads back to the same float32), progression if any."""
    header, cells = probe_cells(prediction, class_names)
    return table_text(prediction, [header], [cells])


def probe_cells(prediction: VideoPrediction, class_names: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """The probe's CSV columns and their cells per frame: predicted and a probability per class, or a
    regression probe's minutes."""
    minutes = prediction.values
    if minutes is None:
        header = [FIXED_COLUMNS[2], *probability_columns(class_names)]
        rows = [
            [
                class_names[int(prediction.predicted[i])],
                *(repr(float(p)) for p in prediction.probabilities[i]),
            ]
            for i in range(prediction.frames)
        ]
        return header, rows
    header, cells = list(prediction.columns or []), [[repr(float(v)) for v in row] for row in minutes]
    if prediction.present is not None:  # a multi-label probe: the labels above threshold after their columns
        header.append(PRESENT_FIELD)
        cells = [[*row, text] for row, text in zip(cells, prediction.present, strict=True)]
    return header, cells


def table_text(
    prediction: VideoPrediction, headers: Sequence[list[str]], cells: Sequence[list[list[str]]]
) -> str:
    """A CSV of time_s, frame_index, the probes' columns (each probe's `probe_cells`, side by side) and the
    progression of `prediction` if any."""
    handle = io.StringIO()
    writer = csv.writer(handle, lineterminator="\n")
    header = [*FIXED_COLUMNS[:2], *(name for part in headers for name in part)]
    if prediction.progression is not None:
        header.append(PROGRESSION_COLUMN)
    writer.writerow(header)
    indices = prediction.frame_indices
    for i, time_s in enumerate(prediction.frame_times):
        index = i if indices is None else int(indices[i])
        row: list[Any] = [f"{time_s:.6f}", index, *(cell for part in cells for cell in part[i])]
        if prediction.progression is not None:
            row.append(f"{prediction.progression[i]:.6f}")
        writer.writerow(row)
    return handle.getvalue()


def plot_prediction(prediction: VideoPrediction, class_names: Sequence[str], title: str):
    """Timeline figure: prediction ribbon (ground truth above it and an error strip when labelled, as in
    `analysis.timeline`), then the class probabilities stacked over time with the progression curve; a
    regression probe's minutes as curves (`plot_minutes`)."""
    if prediction.present is not None:  # a multi-label probe: its labels' presence, a row each
        names = [c.split("_", 1)[-1] for c in prediction.columns or []]
        return presence_figure(title, prediction.frame_times, names, prediction.values.T)
    if prediction.values is not None:
        return plot_minutes(prediction, title)
    colors = class_colors(len(class_names))
    edges = segment_edges(prediction.frame_times)
    fig = new_figure(9.0, 3.6 if prediction.labels is not None else 3.2)
    top, bottom = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [1.0, 1.4]})
    rows = [(1.0, prediction.predicted, "prediction")]
    if prediction.labels is not None:
        rows.insert(0, (2.0, prediction.labels, "ground truth"))
        wrong = (prediction.labels != prediction.predicted) & (prediction.labels >= 0)
        for s, e, c in segments(wrong.astype(np.int64)):
            if c:
                top.broken_barh([(edges[s], edges[e] - edges[s])], (0.05, 0.3), facecolors=ERROR_STRIP)
    for y, labels, _ in rows:
        for s, e, c in segments(labels):
            color = UNLABELLED if c < 0 else colors[c]
            top.broken_barh([(edges[s], edges[e] - edges[s])], (y - 0.4, 0.8), facecolors=color)
    ticks = [(y, name) for y, _, name in rows]
    if prediction.labels is not None:
        ticks.append((0.2, "errors"))
    top.set_yticks([y for y, _ in ticks], [name for _, name in ticks])
    top.set_ylim(0.0 if prediction.labels is not None else 0.55, max(y for y, _ in ticks) + 0.45)
    top.set_title(title, loc="left")
    steps = np.repeat(edges, 2)[1:-1]  # hold each frame's probabilities over its interval
    bottom.stackplot(steps, np.repeat(prediction.probabilities.T, 2, axis=1), colors=colors, linewidth=0)
    if prediction.progression is not None:
        centres = prediction.frame_times
        bottom.plot(centres, prediction.progression, color="black", lw=1.2, label=PROGRESSION_COLUMN)
        bottom.legend(loc="upper left", frameon=False)
    bottom.set_ylim(0.0, 1.0)
    bottom.set_xlim(edges[0], edges[-1])
    bottom.set_ylabel("probability")
    bottom.set_xlabel("time (s)")
    handles = [Patch(color=colors[i], label=name) for i, name in enumerate(class_names)]
    if prediction.labels is not None:
        handles.append(Patch(color=ERROR_STRIP, label="wrong prediction"))
    ncol = min(len(handles), 4)
    fig.legend(handles=handles, loc="lower center", ncol=ncol, frameon=False)
    legend_inches = 0.25 * int(np.ceil(len(handles) / ncol)) + 0.15
    fig.set_figheight(fig.get_figheight() + legend_inches)
    fig.tight_layout(rect=(0, legend_inches / fig.get_figheight(), 1, 1))
    return fig


def plot_minutes(prediction: VideoPrediction, title: str):
    """A regression probe's timeline: each output's minutes over the video, the truth dashed where known
    (the remaining time of a labelled case, `VideoPrediction.truth_minutes`)."""
    columns = list(prediction.columns or [])
    colors = class_colors(max(len(columns), 1))
    fig = new_figure(9.0, 3.2)
    axes = fig.subplots(1, 1)
    times = prediction.frame_times
    values = prediction.values if prediction.values is not None else np.zeros((0, 0))
    for k, name in enumerate(columns):
        axes.plot(times, values[:, k], color=colors[k], lw=1.4, label=f"{name} (predicted)")
    truth = prediction.truth_minutes
    if truth is not None:
        axes.plot(times, truth, color="black", lw=1.0, ls="--", label="truth")
    axes.set_xlabel("time (s)")
    axes.set_ylabel("minutes")
    axes.set_title(title, loc="left")
    if prediction.frames:
        axes.set_xlim(float(times[0]), float(times[-1]) if prediction.frames > 1 else float(times[0]) + 1.0)
    axes.set_ylim(bottom=0.0)
    axes.legend(loc="upper right", frameon=False, fontsize="small", ncol=1 + len(columns) // 6)
    fig.tight_layout()
    return fig


def write_prediction(
    prediction: VideoPrediction, probe: Probe, out: str | Path, title: str
) -> dict[str, str]:
    """Write `<video>.csv` and `<video>.png` under `out`, each atomically; returns their paths."""
    csv_path, png_path = output_paths(out, prediction.video)
    write_text_atomic(csv_path, csv_text(prediction, probe.class_names))
    save_figure(plot_prediction(prediction, probe.class_names, title), png_path)
    prediction.files = {"csv": str(csv_path), "png": str(png_path)}
    return prediction.files
