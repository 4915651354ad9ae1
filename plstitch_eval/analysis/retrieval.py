"""Frame retrieval: the query frame's nearest frames (cosine similarity) in *other* videos, and their phases.

A neighbour whose phase differs from the query's is marked wrong (vermillion border and label). With a dataset
(`--dataset/--root`) the actual frames are shown; without, each tile lists the neighbour's metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.analysis.frames import dataset_records, frame_at
from plstitch_eval.analysis.style import RIGHT, WRONG, class_colors, new_figure, write_outputs
from plstitch_eval.errors import ConfigError
from plstitch_eval.store.features import FeatureStore


@dataclass
class RetrievalConfig:
    """Settings of `plstitch analyze retrieval`."""

    features: str
    query: str
    top: int = 3
    split: str | None = None
    distinct_videos: bool = False
    dataset: str | None = None
    root: str | None = None
    out: Path = Path("figs")
    name: str = "retrieval"


def parse_query(text: str) -> tuple[str, float]:
    """`VIDEO:SECOND` -> (video, seconds); the video name may itself contain colons."""
    video, sep, second = text.rpartition(":")
    try:
        seconds = float(second)
    except ValueError:
        seconds = None
    if not sep or not video or seconds is None:
        raise ConfigError(f"--query {text!r}: expected VIDEO:SECOND, e.g. video41:120.")
    return video, seconds


def l2_normalise(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows scaled to unit length (float64)."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), eps)


def nearest_frames(
    query: np.ndarray, bank: dict[str, np.ndarray], top: int, distinct_videos: bool = False
) -> list[tuple[str, int, float]]:
    """Top-`top` (video, frame index, cosine similarity) over the bank, best first (ties: name, index)."""
    q = l2_normalise(query[None])[0]
    candidates: list[tuple[str, int, float]] = []
    for video, feats in bank.items():
        if len(feats) == 0:
            continue
        sims = l2_normalise(feats) @ q
        keep = 1 if distinct_videos else min(top, len(sims))
        idx = np.argsort(-sims, kind="stable")[:keep]
        candidates += [(video, int(i), float(sims[i])) for i in idx]
    candidates.sort(key=lambda c: (-c[2], c[0], c[1]))
    return candidates[:top]


def _tile(ax, image, lines: list[str], edge: str, face) -> None:
    """One labelled tile: the frame (or a coloured text card) inside a thick coloured border."""
    if image is not None:
        ax.imshow(image)
    else:
        ax.set_facecolor((*face, 0.25))
        ax.text(0.5, 0.5, "\n".join(lines[1:]), ha="center", va="center", fontsize=8, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    for spine in ax.spines.values():
        spine.set_edgecolor(edge)
        spine.set_linewidth(4)
    ax.set_title("\n".join(lines[:1] + lines[1:3]) if image is not None else lines[0], fontsize=8, color=edge)


def plot_retrieval(query: dict[str, Any], neighbours: list[dict[str, Any]], n_classes: int, images=None):
    """Query tile then one tile per neighbour; wrong phases get a vermillion border and label."""
    colors = class_colors(max(n_classes, 1))
    n = len(neighbours) + 1
    fig = new_figure(2.4 * n, 3.0 if images is None else 3.6)
    axes = fig.subplots(1, n, squeeze=False)[0]
    shown = images or [None] * n

    def face(label: int):
        return colors[label] if label >= 0 else (0.7, 0.7, 0.7)

    q_lines = ["query", f"{query['video']} @ {query['time']:.1f} s", query["class_name"]]
    _tile(axes[0], shown[0], q_lines, "black", face(query["label"]))
    for i, nb in enumerate(neighbours, start=1):
        verdict = "same phase" if nb["correct"] else "WRONG phase"
        lines = [
            f"#{i}  {verdict}",
            f"{nb['video']} @ {nb['time']:.1f} s",
            f"{nb['class_name']}  (cos {nb['similarity']:.3f})",
        ]
        _tile(axes[i], shown[i], lines, RIGHT if nb["correct"] else WRONG, face(nb["label"]))
    fig.suptitle(f"Nearest frames from other videos (query phase: {query['class_name']})")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    return fig


def run_retrieval(config: RetrievalConfig) -> tuple[Path, Path, dict[str, Any]]:
    """Find the query frame's nearest neighbours in the other videos of a store, draw and save them."""
    if config.top < 1:
        raise ConfigError(f"--top must be >= 1, got {config.top}.")
    store = FeatureStore(config.features)
    class_names = store.class_names
    video, seconds = parse_query(config.query)
    q_item = store.read(video)
    if len(q_item.frame_times) == 0:
        raise ConfigError(f"{store.path(video)} holds no frames.")
    q_index = int(np.argmin(np.abs(q_item.frame_times - seconds)))
    names = store.splits().get(config.split, []) if config.split else store.videos()
    if config.split and not names:
        raise ConfigError(f"{config.features}: split {config.split!r} is empty or missing.")
    others = {v.video: v for v in store.read_many(n for n in names if n != video)}
    if not others:
        raise ConfigError(f"{config.features}: no other videos to search besides {video!r}.")
    found = nearest_frames(
        q_item.features[q_index],
        {v: item.features for v, item in others.items()},
        config.top,
        config.distinct_videos,
    )

    def describe(item, index: int) -> dict[str, Any]:
        label = int(item.labels[index])
        name = (
            class_names[label]
            if 0 <= label < len(class_names)
            else ("unlabelled" if label < 0 else str(label))
        )
        return {
            "video": item.video,
            "index": index,
            "time": float(item.frame_times[index]),
            "label": label,
            "class_name": name,
        }

    query = describe(q_item, q_index)
    neighbours = []
    for v, index, sim in found:
        nb = describe(others[v], index)
        nb.update(similarity=sim, correct=bool(nb["label"] == query["label"]))
        neighbours.append(nb)
    images = _load_images(config, [query, *neighbours]) if config.dataset else None
    fig = plot_retrieval(query, neighbours, len(class_names), images)
    data = {
        "analysis": "retrieval",
        "features": str(config.features),
        "class_names": class_names,
        "query": query,
        "neighbours": neighbours,
        "precision_at_k": float(np.mean([nb["correct"] for nb in neighbours])) if neighbours else 0.0,
        "distinct_videos": config.distinct_videos,
    }
    png, js = write_outputs(fig, data, config.out, config.name)
    return png, js, data


def _load_images(config: RetrievalConfig, frames: list[dict[str, Any]]) -> list[np.ndarray]:
    """Decode the shown frames from the dataset videos (first frame at or after each time)."""
    _, records = dataset_records(config.dataset, config.root, None)
    by_name = {r.name: r for r in records}
    missing = sorted({f["video"] for f in frames} - set(by_name))
    if missing:
        raise ConfigError(f"Dataset {config.dataset!r} at {config.root} has no videos {missing}.")
    return [frame_at(by_name[f["video"]], f["time"]) for f in frames]
