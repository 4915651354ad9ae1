"""The `triplets` task: which <instrument, verb, target> action triplets a frame shows (CholecT50/CholecT45).

Multi-label over CholecT50's 100 triplets, fitted by the linear protocol's multi-label probe
(`protocols/multilabel.py`, results task `linear-triplets`) or a multi-label MS-TCN
(`protocols/temporal_multilabel.py`, `temporal-triplets`), the head chosen on validation mAP_IVT. Scored
as CAMMA's `ivtmetrics` scores it (`metrics/triplets.py`): video-wise AP per class, the mean over the videos
that have the class, then over the classes, for the triplets (IVT) and the components derived from them
(I, V, T, IV, IT: per frame the max over the triplets sharing that component). The metrics are computed from
the stored probabilities themselves (6 decimals), so `triplet_maps` on the results' `predictions` and the
store's labels gives them again exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_NAMES
from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.triplets import COMPONENTS, triplet_maps
from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.tasks.registry import MULTI_LABEL, MultiLabel, Task, register_task

METRICS = tuple(f"mAP_{component.upper()}" for component in COMPONENTS)  # mAP_I, ..., mAP_IVT
SELECT = "mAP_IVT"


def score(
    scores: Sequence[np.ndarray], targets: Sequence[np.ndarray], names: Sequence[str]
) -> dict[str, Any]:
    """The six ivtmetrics mAPs (percent) of one [F, 100] score and 0/1 label array per video."""
    if list(names) != list(TRIPLET_NAMES):
        raise EvaluationError(
            "The store's triplet_names are not CholecT50's 100 triplets in their order, so the I, V, T, IV "
            "and IT maps cannot be derived; extract the store from cholect50, cholect45 or "
            "synthetic-triplets."
        )
    maps = triplet_maps(scores, targets)
    return {f"mAP_{component.upper()}": maps[f"mAP_{component}"] for component in COMPONENTS}


def triplet_labels(item: VideoFeatures) -> np.ndarray | None:
    """A stored video's triplet rows (None: it has none)."""
    return item.triplets


TASK = register_task(
    Task(
        name="triplets",
        summary="which instrument-verb-target action triplets each frame shows (CholecT50)",
        head=MULTI_LABEL,
        labels="per-frame action triplets (the manifest's triplet_names, CholecT50's 100)",
        metrics=METRICS,
        select_metric=SELECT,
        protocols=("linear", "temporal"),
        multilabel=MultiLabel(
            names_key="triplet_names",
            labels=triplet_labels,
            score=score,
            per_video=METRICS,
            missing=(
                "--task triplets needs a store extracted from --dataset cholect50 or cholect45, whose "
                "labels/VIDxx.json give the triplets, or synthetic-triplets"
            ),
            decimals=6,
            score_stored=True,
        ),
        results_tasks={"linear": "linear-triplets", "temporal": "temporal-triplets"},
    )
)
