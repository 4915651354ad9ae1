"""Timeline ribbons (paper's qualitative figure): ground truth and predicted phase per frame for a few videos.

Predictions come from a results JSON (`predictions`: video -> class id per frame, see docs/results-json.md);
ground truth and frame times from the feature store the predictions were made on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.patches import Patch

from plstitch_eval.analysis.style import ERROR_STRIP, UNLABELLED, class_colors, new_figure, write_outputs
from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.store.features import FeatureStore


@dataclass
class TimelineConfig:
    """Settings of `plstitch analyze timeline`."""

    features: str
    pred: str
    videos: list[str] | None = None
    max_videos: int = 4
    out: Path = Path("figs")
    name: str = "timeline"


def segments(labels: np.ndarray) -> list[tuple[int, int, int]]:
    """Runs of equal labels as `(start, end_exclusive, label)`."""
    labels = np.asarray(labels)
    if labels.size == 0:
        return []
    change = np.flatnonzero(labels[1:] != labels[:-1]) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [len(labels)]])
    return [(int(s), int(e), int(labels[s])) for s, e in zip(starts, ends, strict=True)]


def load_predictions(path: str | Path) -> dict[str, Any]:
    """Read a results JSON and check that it carries per-frame predictions."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path} not found; pass the results JSON written by `plstitch knn/linear`.")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}.") from exc
    if not isinstance(results.get("predictions"), dict) or not results["predictions"]:
        raise ConfigError(
            f"{path} has no 'predictions' (video -> class id per frame); re-run the evaluation."
        )
    return results


def resolve_videos(wanted: list[str] | None, available: list[str], max_videos: int) -> list[str]:
    """Match requested names exactly, else by their number (`41` -> `video41`); default the first few."""
    if not wanted:
        return available[:max_videos]
    numbers = {}
    for name in available:
        match = re.search(r"(\d+)$", name)
        if match:
            numbers.setdefault(int(match.group(1)), []).append(name)
    out = []
    for w in wanted:
        if w in available:
            out.append(w)
        elif w.isdigit() and len(numbers.get(int(w), [])) == 1:
            out.append(numbers[int(w)][0])
        else:
            raise ConfigError(
                f"--videos: {w!r} matches no single video with predictions; available: {available[:12]}"
            )
    return out


def segment_edges(frame_times: np.ndarray) -> np.ndarray:
    """T+1 edges in seconds: frame i covers `[t_i, t_{i+1})`, the last one a median step long."""
    t = np.asarray(frame_times, dtype=np.float64)
    step = float(np.median(np.diff(t))) if len(t) > 1 else 1.0
    return np.concatenate([t, [t[-1] + step]]) if len(t) else np.zeros(1)


def plot_timelines(rows: list[dict[str, Any]], class_names: list[str], title: str):
    """Per video a ground-truth ribbon, a prediction ribbon and a thin black error strip; class legend."""
    n_classes = max(len(class_names), 1 + max(int(max(r["gt"].max(), r["pred"].max())) for r in rows))
    colors = class_colors(n_classes)
    fig = new_figure(9.0, 1.25 * len(rows) + 1.2)
    axes = fig.subplots(len(rows), 1, squeeze=False)[:, 0]
    for ax, row in zip(axes, rows, strict=True):
        edges = segment_edges(row["frame_times"])
        for y, labels in ((2.0, row["gt"]), (1.0, row["pred"])):
            for s, e, c in segments(labels):
                color = UNLABELLED if c < 0 else colors[c]
                ax.broken_barh([(edges[s], edges[e] - edges[s])], (y - 0.4, 0.8), facecolors=color)
        for s, e, c in segments((row["gt"] != row["pred"]).astype(np.int64)):
            if c:
                ax.broken_barh([(edges[s], edges[e] - edges[s])], (0.05, 0.3), facecolors=ERROR_STRIP)
        ax.set_yticks([2.0, 1.0, 0.2], ["ground truth", "prediction", "errors"])
        ax.set_ylim(0.0, 2.45)
        ax.set_xlim(edges[0], edges[-1])
        ax.set_title(f"{row['video']}  (accuracy {row['accuracy']:.1f}%)", loc="left")
        ax.set_xlabel("time (s)")
    names = [class_names[i] if i < len(class_names) else str(i) for i in range(n_classes)]
    handles = [Patch(color=colors[i], label=names[i]) for i in range(n_classes)]
    handles.append(Patch(color=ERROR_STRIP, label="wrong prediction"))
    ncol = min(len(handles), 4 if len(handles) <= 12 else 6)
    fig.legend(handles=handles, loc="lower center", ncol=ncol, frameon=False)
    fig.suptitle(title)
    legend_inches = 0.25 * int(np.ceil(len(handles) / ncol)) + 0.15
    fig.tight_layout(rect=(0, min(0.5, legend_inches / fig.get_figheight()), 1, 1))
    return fig


def run_timeline(config: TimelineConfig) -> tuple[Path, Path, dict[str, Any]]:
    """Pair each chosen video's predictions with its ground truth, draw and save the ribbons."""
    results = load_predictions(config.pred)
    store = FeatureStore(config.features)
    class_names = list(results.get("class_names") or store.class_names)
    videos = resolve_videos(config.videos, list(results["predictions"]), config.max_videos)
    rows, per_video = [], {}
    for video in videos:
        item = store.read(video)
        pred = np.asarray(results["predictions"][video], dtype=np.int64)
        if len(pred) != len(item.labels):
            raise EvaluationError(
                f"{config.pred}: video {video!r} has {len(pred)} predictions but {config.features} holds "
                f"{len(item.labels)} frames; were the predictions made on this feature store?"
            )
        accuracy = float((pred == item.labels).mean() * 100) if len(pred) else 0.0
        rows.append(
            {
                "video": video,
                "gt": item.labels,
                "pred": pred,
                "frame_times": item.frame_times,
                "accuracy": accuracy,
            }
        )
        per_video[video] = {
            "n_frames": len(pred),
            "accuracy": accuracy,
            "gt_segments": segments(item.labels),
            "pred_segments": segments(pred),
        }
    task = results.get("task", "")
    title = f"Ground truth vs. {task} predictions ({results.get('dataset', Path(config.features).name)})"
    fig = plot_timelines(rows, class_names, title)
    data = {
        "analysis": "timeline",
        "features": str(config.features),
        "pred": str(config.pred),
        "class_names": class_names,
        "videos": videos,
        "per_video": per_video,
    }
    png, js = write_outputs(fig, data, config.out, config.name)
    return png, js, data
