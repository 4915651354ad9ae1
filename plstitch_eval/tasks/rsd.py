"""The `rsd` task: remaining surgery duration - minutes from each frame to its video's end (RSDNet).

Targets and MAE (all frames, each video's last 2 and 5 minutes; pooled and per video) are
`metrics/remaining.py`'s. Two reference rows: RSDNet's naive one (the mean training duration minus the
elapsed time) and the training frames' mean remaining time at the same elapsed time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plstitch_eval.metrics.remaining import (
    mean_target_at_elapsed,
    naive_rsd,
    remaining_targets,
    rsd_scores,
    video_end_s,
)
from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.tasks.anticipation import elapsed_min
from plstitch_eval.tasks.registry import (
    REGRESSION,
    Regression,
    Scored,
    StoreInfo,
    Task,
    TaskSettings,
    register_task,
)

OUTPUT = "remaining"


def targets(item: VideoFeatures, _info: StoreInfo, _settings: TaskSettings) -> np.ndarray:
    """Minutes from each frame to the video's end (frames x 1)."""
    return remaining_targets(item.frame_times)[:, None]


def _metric(key: str) -> str:
    return key.replace("mae", "MAE")


def score(
    predictions: Mapping[str, np.ndarray],
    truth: Mapping[str, np.ndarray],
    _info: StoreInfo,
    _settings: TaskSettings,
) -> Scored:
    """MAE over all frames and each video's last 2 / 5 minutes: pooled (headline) and mean over videos."""
    scored = rsd_scores(
        {v: np.asarray(p)[:, 0] for v, p in predictions.items()},
        {v: np.asarray(t)[:, 0] for v, t in truth.items()},
    )
    metrics = {_metric(k): v for k, v in scored["pooled"].items()}
    metrics.update({f"{_metric(k)}_per_video": v for k, v in scored["video_mean"].items()})
    per_video = {video: {_metric(k): v for k, v in own.items()} for video, own in scored["per_video"].items()}
    mae = scored["pooled"]["mae"]
    return Scored(metrics, per_video, {}, float("inf") if mae is None else float(mae))


def references(
    train: Sequence[VideoFeatures], test: Sequence[VideoFeatures], info: StoreInfo, settings: TaskSettings
) -> dict[str, tuple[str, dict[str, np.ndarray]]]:
    """RSDNet's naive reference and the mean remaining time at the same elapsed time."""
    mean_duration = float(np.mean([video_end_s(item.frame_times) / 60.0 for item in train]))
    naive = {it.video: naive_rsd(mean_duration, elapsed_min(it))[:, None] for it in test}
    train_targets = [targets(item, info, settings) for item in train]
    train_elapsed = [elapsed_min(item) for item in train]
    at_elapsed = {
        it.video: mean_target_at_elapsed(train_targets, train_elapsed, elapsed_min(it)) for it in test
    }
    return {
        "naive": (f"mean training duration ({mean_duration:.2f} min) minus elapsed time (RSDNet)", naive),
        "elapsed-mean": ("the training frames' mean remaining time at the same elapsed time", at_elapsed),
    }


TASK = register_task(
    Task(
        name="rsd",
        summary="remaining surgery duration: minutes from each frame to the video's end",
        head=REGRESSION,
        labels="frame times only (any store)",
        metrics=("MAE", "MAE_last_2min", "MAE_last_5min"),
        select_metric="MAE (validation frames)",
        protocols=("knn", "linear", "temporal"),
        regression=Regression(
            outputs=lambda _info, _settings: [OUTPUT],
            targets=targets,
            bounds=lambda _info, _settings: (0.0, None),
            score=score,
            references=references,
        ),
    )
)
