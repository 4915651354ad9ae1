"""Score predicted frame labels: the headline metrics of a dataset's family, its background classes, frame and
segment metrics per video, and where the relaxed-boundary block sits in a results dict.

Dataset facts (family, background) are read from the dataset adapters (`plstitch_eval.data.datasets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from plstitch_eval.data.datasets import dataset_facts
from plstitch_eval.metrics.frames import frame_metrics
from plstitch_eval.metrics.segments import DEFAULT_OVERLAPS, segment_metrics

SURGICAL_METRICS = ("accuracy", "macro_f1_pooled", "macro_f1_video")
COOKING_METRICS = ("accuracy", "edit", "f1@10", "f1@25", "f1@50")


def default_metrics(dataset: str | None) -> tuple[str, ...]:
    """Headline metrics: cooking -> accuracy, Edit, F1@{10,25,50}; surgical -> accuracy + macro F1 x2."""
    return COOKING_METRICS if dataset_facts(dataset).family == "cooking" else SURGICAL_METRICS


def background_ids(manifest: dict[str, Any], class_names: Sequence[str]) -> list[int]:
    """Class ids dropped from segment metrics: manifest ``background_classes`` else the dataset's own."""
    names = manifest.get("background_classes")
    if names is None:
        names = dataset_facts(manifest.get("dataset")).background_classes
    ids = []
    for name in names:
        if isinstance(name, int):
            ids.append(name)
        elif name in class_names:
            ids.append(list(class_names).index(name))
    return ids


def score_videos(
    preds: dict[str, np.ndarray],
    gts: dict[str, np.ndarray],
    num_classes: int,
    bg_ids: Sequence[int] = (),
    overlaps: Sequence[float] = DEFAULT_OVERLAPS,
) -> dict[str, Any]:
    """Frame metrics (both macro conventions) and segment metrics for videos -> {"metrics", "per_video"}."""
    videos = list(gts)
    p = [np.asarray(preds[v]) for v in videos]
    g = [np.asarray(gts[v]) for v in videos]
    frames = frame_metrics(p, g, num_classes, videos)
    segments = segment_metrics(p, g, bg_ids, overlaps, videos)
    per_video = {v: {**frames["per_video"][v], **segments["per_video"][v]} for v in videos}
    return {"metrics": {**frames["metrics"], **segments["metrics"]}, "per_video": per_video}


def with_relaxed(results: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """`results` with the ``relaxed`` block placed right after the strict ``metrics``, else unchanged."""
    out: dict[str, Any] = {}
    for key, value in results.items():
        out[key] = value
        if key == "metrics":
            out["relaxed"] = block
    return out
