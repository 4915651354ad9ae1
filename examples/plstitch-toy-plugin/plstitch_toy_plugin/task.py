"""`toy-progress`: the fraction of the video elapsed at each frame, a plstitch regression task from another
package.

Its target is each frame's time over the video's end (the last frame's time plus the median frame step,
`metrics.remaining.video_end_s`), in [0, 1], so it needs no labels: any feature store has it. Registered at
import (`register_task`), so `plstitch tasks` lists it and `plstitch knn|linear --task toy-progress` fits it;
scored by the mean absolute error over the test frames (pooled, and per video), beside a reference row: the
training frames' mean progress at the same elapsed time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plstitch_eval.metrics.remaining import mean_target_at_elapsed, video_end_s
from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.tasks import REGRESSION, Regression, Scored, StoreInfo, Task, TaskSettings, register_task

NAME = "toy-progress"


def targets(item: VideoFeatures, _info: StoreInfo, _settings: TaskSettings) -> np.ndarray:
    """The fraction of the video elapsed at each frame (frames x 1)."""
    times = np.asarray(item.frame_times, dtype=np.float64)
    return (times / video_end_s(times))[:, None]


def score(
    predictions: Mapping[str, np.ndarray],
    truth: Mapping[str, np.ndarray],
    _info: StoreInfo,
    _settings: TaskSettings,
) -> Scored:
    """MAE over every test frame together (the headline, and the figure a head is chosen on) and per video."""
    errors = {v: np.abs(np.asarray(predictions[v])[:, 0] - np.asarray(truth[v])[:, 0]) for v in sorted(truth)}
    pooled = float(np.concatenate(list(errors.values())).mean())
    per_video = {v: {"MAE": float(e.mean())} for v, e in errors.items()}
    video_mean = float(np.mean([e.mean() for e in errors.values()]))
    return Scored({"MAE": pooled, "MAE_per_video": video_mean}, per_video, {}, pooled)


def elapsed_min(item: VideoFeatures) -> np.ndarray:
    return np.asarray(item.frame_times, dtype=np.float64) / 60.0


def references(
    train: Sequence[VideoFeatures], test: Sequence[VideoFeatures], info: StoreInfo, settings: TaskSettings
) -> dict[str, tuple[str, dict[str, np.ndarray]]]:
    """The training frames' mean progress at the same elapsed time (0.1-minute bins), for each test frame."""
    train_targets = [targets(item, info, settings) for item in train]
    train_elapsed = [elapsed_min(item) for item in train]
    preds = {it.video: mean_target_at_elapsed(train_targets, train_elapsed, elapsed_min(it)) for it in test}
    return {"elapsed-mean": ("the training frames' mean progress at the same elapsed time", preds)}


TOY_PROGRESS = register_task(
    Task(
        name=NAME,
        summary="the fraction of the video elapsed at each frame (0 to 1)",
        head=REGRESSION,
        labels="frame times only (any store)",
        metrics=("MAE",),
        select_metric="MAE (validation frames)",
        protocols=("knn", "linear"),
        regression=Regression(
            outputs=lambda _info, _settings: ["progress"],
            targets=targets,
            bounds=lambda _info, _settings: (0.0, 1.0),
            score=score,
            references=references,
            column=lambda name: name,  # a fraction, not minutes
        ),
    )
)
