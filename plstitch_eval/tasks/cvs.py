"""The `cvs` task: whether a frame shows the critical view of safety, criterion by criterion (Endoscapes2023).

Multi-label over the three criteria (C1 two structures, C2 the hepatocystic triangle cleared, C3 the lower
gallbladder off the cystic plate), fitted by the linear protocol's multi-label probe
(`protocols/multilabel.py`, results task `linear-cvs`; or a multi-label MS-TCN, `temporal-cvs`) on the
raters' mean as soft targets, on the rated
frames only; the head chosen on validation mAP. Scored as CAMMA's SurgLatentGraph `CVSMetric` scores it
(`metrics/cvs.py`): AP, F1 and balanced accuracy against the rounded raters' mean, the Brier score against
the unrounded one; the frames of all test videos pooled, and video-wise beside it (`video_mAP`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from plstitch_eval.metrics.cvs import cvs_metrics
from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.tasks.registry import MULTI_LABEL, MultiLabel, Task, register_task

METRICS = ("mAP", "brier", "f1", "balanced_accuracy", "video_mAP", "video_brier")
PER_CRITERION = ("AP", "brier", "f1", "balanced_accuracy")
PER_VIDEO = ("mAP", "brier", "f1", "balanced_accuracy")


def score(
    scores: Sequence[np.ndarray], targets: Sequence[np.ndarray], names: Sequence[str]
) -> dict[str, Any]:
    """CVS metrics of one [F, 3] probability and raters'-mean array per video: pooled over frames (the
    headline and each criterion's) and video-wise (`video_*`); an undefined figure (no positive frame) is
    NaN, written as null."""
    both = cvs_metrics(scores, targets)
    pooled, per_video = both["per_frame"], both["per_video"]
    out: dict[str, Any] = {}
    for key in METRICS:
        value = per_video[key.removeprefix("video_")] if key.startswith("video_") else pooled[key]
        out[key] = float("nan") if value is None else value
    for key in PER_CRITERION:
        for name in names:
            value = pooled.get(f"{key}_{name}")
            out[f"{key}_{name}"] = float("nan") if value is None else value
    return out


def cvs_labels(item: VideoFeatures) -> np.ndarray | None:
    """A stored video's raters' means per criterion (NaN: not rated; None: it has none)."""
    return item.cvs


TASK = register_task(
    Task(
        name="cvs",
        summary="whether each frame shows the critical view of safety, per criterion (Endoscapes2023)",
        head=MULTI_LABEL,
        labels="per-frame raters' mean of C1-C3 on the rated frames (the manifest's cvs_names)",
        metrics=METRICS,
        select_metric="mAP",
        protocols=("linear", "temporal"),
        multilabel=MultiLabel(
            names_key="cvs_names",
            labels=cvs_labels,
            score=score,
            per_video=PER_VIDEO,
            missing=(
                "--task cvs needs a store extracted from --dataset endoscapes or synthetic-cvs, whose "
                "annotations rate C1-C3"
            ),
            decimals=6,
            score_stored=True,
            soft=True,
        ),
        results_tasks={"linear": "linear-cvs", "temporal": "temporal-cvs"},
    )
)
