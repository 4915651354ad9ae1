"""The `tools` task: which instruments a frame shows - multi-label, scored by AP per tool and mAP.

Fitted by the linear protocol's multi-label probe (`protocols/multilabel.py`, results task `linear-tools`),
as `linear --task tools` did before this registry, or by a multi-label MS-TCN (`temporal-tools`). AP is
scikit-learn's, **pooled** over the test frames of every video (SelfSupSurg, LEMON and SurgeNet report it so);
each test video also gets its own mAP.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.metrics import average_precision_score

from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.tasks.registry import MULTI_LABEL, MultiLabel, Task, register_task

MAP = "mAP"


def ap_key(tool: str) -> str:
    """The metric name of one tool's average precision, e.g. `AP_Grasper`."""
    return f"AP_{tool}"


def average_precisions(scores: np.ndarray, targets: np.ndarray) -> list[float | None]:
    """Average precision (%) of each column of `scores` [N, K] against 0/1 `targets`; None for a tool with
    no positive frame (its AP is undefined)."""
    return [
        float(average_precision_score(targets[:, j], scores[:, j]) * 100.0) if targets[:, j].any() else None
        for j in range(targets.shape[1])
    ]


def mean_ap(aps: list[float | None]) -> float:
    """Mean over the tools whose AP is defined (NaN when none is)."""
    defined = [a for a in aps if a is not None]
    return float(np.mean(defined)) if defined else float("nan")


def score(
    scores: Sequence[np.ndarray], targets: Sequence[np.ndarray], names: Sequence[str]
) -> dict[str, Any]:
    """mAP and AP per tool of the frames of all videos pooled."""
    aps = average_precisions(np.concatenate(scores), np.concatenate(targets))
    return {MAP: mean_ap(aps), **{ap_key(t): a for t, a in zip(names, aps, strict=True)}}


def tool_labels(item: VideoFeatures) -> np.ndarray | None:
    """A stored video's tool presence rows (None: it has none)."""
    return item.tools


TASK = register_task(
    Task(
        name="tools",
        summary="which instruments each frame shows (tool presence)",
        head=MULTI_LABEL,
        labels="per-frame tool presence (the manifest's tool_names)",
        metrics=(MAP,),
        select_metric=MAP,
        protocols=("linear", "temporal"),
        multilabel=MultiLabel(
            names_key="tool_names",
            labels=tool_labels,
            score=score,
            per_video=(MAP,),
            missing="--task tools needs Cholec80 with tool_annotations/, or the synthetic dataset",
        ),
        results_tasks={"linear": "linear-tools", "temporal": "temporal-tools"},
    )
)
