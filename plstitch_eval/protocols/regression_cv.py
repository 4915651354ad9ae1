"""k-fold cross-validation by video of a regression task (`plstitch cv --task anticipation|rsd`).

The folds are the phase CV's (`splits.kfold_by_video` over every video of the store's splits, each tested
once); each fold fits the head (`regression.HEAD_FITS`) on the other videos, holding validation videos out
by video for the heads that choose (linear, temporal), and scores its test videos and the task's reference
rows (built from the fold's training videos). Metrics are the mean and std over folds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.protocols.cv import check_fold_holdout
from plstitch_eval.protocols.data import load_videos
from plstitch_eval.protocols.registry import CV_TASK, config_record
from plstitch_eval.protocols.regression import (
    HEAD_CHOICE,
    HEAD_FITS,
    predictions_record,
    score_references,
    task_data,
)
from plstitch_eval.results_json import results_record
from plstitch_eval.splits import cv_videos, holdout_by_video, kfold_by_video
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import TaskSettings


def _mean_std(
    records: list[dict[str, float | None]],
) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Per metric, the mean and std over the folds where it is defined (None where it is in none)."""
    means, stds = {}, {}
    for key in records[0]:
        values = [r[key] for r in records if r.get(key) is not None]
        means[key] = float(np.mean(values)) if values else None
        stds[key] = float(np.std(values)) if values else None
    return means, stds


def run_regression_cv(
    features: str | Path,
    task_name: str,
    settings: TaskSettings,
    head: str,
    config: Any,
    folds: int = 5,
    seed: int = 0,
    val_fraction: float = 0.2,
    progress: bool = False,
) -> dict[str, Any]:
    """`head` (knn, linear or temporal, with its `config`) cross-validated on `task_name`: mean ± std over
    folds, each fold's record (its choice and validation scores), every video's predictions."""
    store = FeatureStore(features)
    data = task_data(store, task_name, head, settings)
    videos = cv_videos(store)
    test_folds = kfold_by_video(videos, folds, seed)
    chooses = head != "knn"
    if chooses:
        check_fold_holdout(videos, test_folds, val_fraction, head)
    items = {it.video: it for it in load_videos(store, videos)}
    fold_records, references, all_preds, per_video = [], {}, {}, {}
    for i, test_videos in enumerate(test_folds):
        rest = [v for v in videos if v not in set(test_videos)]
        train_v, val_v = holdout_by_video(rest, val_fraction, seed + i) if chooses else (rest, [])
        train, val, test = ([items[v] for v in vs] for vs in (train_v, val_v, test_videos))
        preds, record, _ = HEAD_FITS[head](data, train, val, test, config, progress)
        scored = data.score(preds, test)
        fold_records.append({"fold": i, "test": list(test_videos), "metrics": scored.metrics, **record})
        for name, ref in score_references(data, train, test).items():
            references.setdefault(name, {"description": ref["description"], "folds": []})
            references[name]["folds"].append(ref["metrics"])
        all_preds.update(preds)
        per_video.update(scored.per_video)
    metrics, metrics_std = _mean_std([f["metrics"] for f in fold_records])
    for ref in references.values():
        ref["metrics"], ref["metrics_std"] = _mean_std(ref.pop("folds"))
    protocol = {
        "name": CV_TASK,
        "inner": data.task.results_task(head),
        "head": head,
        "task": data.task.name,
        **settings.record(),
        "outputs": data.outputs,
        "folds": folds,
        "seed": seed,
        **config_record(config),
        **HEAD_CHOICE.get(head, {}),
    }
    if head in HEAD_CHOICE:  # what the fold heads choose on: the task's validation error
        protocol["select_metric"] = data.task.select_metric
    results = results_record(
        f"{CV_TASK}-{data.task.results_task(head)}",
        store.manifest,
        features,
        protocol,
        {"folds": test_folds},
        data.outputs,
        headline=[m for m in data.task.metrics if m in metrics],
        metrics=metrics,
        per_video=per_video,
        predictions={v: predictions_record(p) for v, p in all_preds.items()},
    )
    results["metrics_std"] = metrics_std
    results["folds"] = fold_records
    results["references"] = references
    return results
