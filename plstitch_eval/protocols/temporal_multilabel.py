"""The temporal protocol of a multi-label task (tools, triplets, cvs): a multi-label MS-TCN on the train
videos, its epoch chosen on val by the task's `select_metric`, the test videos scored by the task's own
`MultiLabel.score`.

The splits, the hold-out of val by video, the label checks and the results JSON are those of the linear
multi-label probe (`protocols/multilabel.py`, results task `temporal-<task>`): the network sees every frame
of a video, the loss and the metrics only the annotated ones (`temporal/multilabel.py`), and `predictions`
hold each test video's stored probabilities of its annotated frames, so every figure can be recomputed.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from plstitch_eval.errors import EvaluationError
from plstitch_eval.protocols.data import take_subset
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, over_subsets
from plstitch_eval.protocols.multilabel import (
    Scored,
    absent_labels,
    label_names,
    load_labelled,
    multilabel_spec,
    noun,
    scored_videos,
    shown_classes,
)
from plstitch_eval.results_json import results_record
from plstitch_eval.splits import check_holdout, holdout_by_video, resolve_splits
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.tasks.registry import MultiLabel, Task, get_task
from plstitch_eval.temporal.fit import TemporalConfig
from plstitch_eval.temporal.multilabel import MultiLabelTCNResult, fit_multilabel_tcn

PROTOCOL = "temporal"


def kept_frames(rows: np.ndarray) -> np.ndarray:
    """The frames whose label row is fully annotated (no -1, no NaN): those a metric scores."""
    return (np.isfinite(rows) & (rows >= 0)).all(axis=1)


def frame_targets(rows: np.ndarray, soft: bool) -> np.ndarray:
    """A video's annotated rows as the metric takes them: fractions (float32) or 0/1 (int8)."""
    return rows.astype(np.float32 if soft else np.int8)


def task_scores(
    spec: MultiLabel, names: list[str], probs: list[np.ndarray], rows: list[np.ndarray]
) -> dict[str, Any]:
    """The task's metrics of per-video probabilities [T, K] on each video's annotated frames."""
    keep = [kept_frames(r) for r in rows]
    return spec.score(
        [p[k] for p, k in zip(probs, keep, strict=True)],
        [frame_targets(r[k], spec.soft) for r, k in zip(rows, keep, strict=True)],
        names,
    )


def run_multilabel_temporal(
    task: str | Task,
    features: str | Path,
    config: TemporalConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """A multi-label task's temporal protocol -> results (task `task.results_task("temporal")`).

    `train_fraction`: on subsets of the training videos, one per seed, each covering the columns.
    """
    task = get_task(task) if isinstance(task, str) else task
    multilabel_spec(task)
    config = config or TemporalConfig()
    run = partial(_run, task, features, config, scheme, val_fraction, progress)
    return over_subsets(lambda draw: run(draw)[0], train_fraction)


def fit_multilabel_temporal(
    task: str | Task,
    features: str | Path,
    config: TemporalConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
) -> tuple[dict[str, Any], MultiLabelTCNResult]:
    """`run_multilabel_temporal` on all the training videos, with the fitted MS-TCN (what `--save` keeps:
    `protocols.multilabel_probe.save_temporal_multilabel_probe`)."""
    task = get_task(task) if isinstance(task, str) else task
    multilabel_spec(task)
    return _run(task, features, config or TemporalConfig(), scheme, val_fraction, progress, None)


def _load(
    task: Task, store: FeatureStore, config: TemporalConfig, scheme: str | None, val_fraction: float,
    draw: SubsetDraw | None,
) -> tuple[dict[str, list[str]], str, dict[str, list[VideoFeatures]], list[str]]:  # fmt: skip
    spec = multilabel_spec(task)
    names = label_names(store, task)
    check_holdout(store, scheme, val_fraction, f"the temporal {noun(spec)} model chooses its epoch")
    splits, validation = resolve_splits(store, scheme), "official"
    if not splits["val"]:
        splits["train"], splits["val"] = holdout_by_video(splits["train"], val_fraction, config.seed)
        validation = f"held out by video ({val_fraction:.0%} of train, seed {config.seed})"
    parts = {s: load_labelled(store, splits[s], s, spec) for s in ("train", "val", "test")}
    parts["train"] = take_subset(parts["train"], draw, shown_classes(names, spec))
    return splits, validation, annotated_parts(parts, spec, str(store.root)), names


def annotated_parts(
    parts: dict[str, list[VideoFeatures]], spec: MultiLabel, where: str
) -> dict[str, list[VideoFeatures]]:
    """`parts` less the val and test videos without an annotated frame (nothing there to score); one line
    for a split left without any (`where`: the store, or the CV fold of it)."""
    parts = dict(parts)
    for split in ("val", "test"):
        parts[split] = [it for it in parts[split] if kept_frames(spec.labels(it)).any()]
    for split, items in parts.items():
        if not any(kept_frames(spec.labels(it)).any() for it in items):
            raise EvaluationError(f"The {split} split of {where} has no {noun(spec)}-annotated frames.")
    return parts


def fit_loaded(
    task: Task, names: list[str], parts: dict[str, list[VideoFeatures]], config: TemporalConfig,
    progress: bool = False,
) -> tuple[MultiLabelTCNResult, Scored]:  # fmt: skip
    """The MS-TCN fitted on `parts["train"]`, its epoch chosen on `parts["val"]` by the task's
    `select_metric`, and `parts["test"]` scored (metrics, per video, stored probabilities): what one split
    and each CV fold (`multilabel_cv.py`) run, on parts that `annotated_parts` kept."""
    spec = multilabel_spec(task)
    pair = {s: [(it.features, spec.labels(it).astype(np.float32)) for it in parts[s]] for s in parts}
    val_rows = [spec.labels(it) for it in parts["val"]]
    fit = fit_multilabel_tcn(
        pair["train"], pair["val"],
        lambda probs: task_scores(spec, names, probs, val_rows)[task.select_metric], config, progress,
    )  # fmt: skip
    return fit, _test_scores(spec, names, fit, parts["test"])


def _run(
    task: Task, features: str | Path, config: TemporalConfig, scheme: str | None, val_fraction: float,
    progress: bool, draw: SubsetDraw | None,
) -> tuple[dict[str, Any], MultiLabelTCNResult]:  # fmt: skip
    spec, results_task = multilabel_spec(task), task.results_task(PROTOCOL)
    store = FeatureStore(features)
    splits, validation, parts, names = _load(task, store, config, scheme, val_fraction, draw)
    fit, (metrics, per_video, predictions) = fit_loaded(task, names, parts, config, progress)
    test_rows = np.concatenate([spec.labels(it)[kept_frames(spec.labels(it))] for it in parts["test"]])
    protocol = {
        "name": results_task,
        "head": "multi-label MS-TCN",
        **asdict(config),
        "select_metric": task.select_metric,
        "validation": validation,
        "chosen_epoch": fit.best_epoch,
        "val_scores": fit.val_scores,
        "train_losses": fit.train_losses,
        "device": fit.device,
        "threads": fit.threads,
        "torch": torch.__version__,
        "frames": {s: int(sum(kept_frames(spec.labels(it)).sum() for it in parts[s])) for s in parts},
        f"{task.name}_without_positives": absent_labels(names, test_rows),
    }
    record = results_record(
        results_task, store.manifest, features, protocol, splits, names,
        headline=list(task.metrics), metrics=metrics, per_video=per_video, predictions=predictions,
    )  # fmt: skip
    return record, fit


def _test_scores(
    spec: MultiLabel, names: list[str], fit: MultiLabelTCNResult, items: list[VideoFeatures]
) -> tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, list[list[float]]]]:
    """The task's metrics on the test videos' annotated frames, each video's own, and the stored
    probabilities (rounded to `spec.decimals`; with `score_stored` the figures come from them, as the linear
    multi-label probe's do)."""
    rows = [spec.labels(it) for it in items]
    keep = [kept_frames(r) for r in rows]
    own = [fit.predict(it.features)[k] for it, k in zip(items, keep, strict=True)]
    targets = [frame_targets(r[k], spec.soft) for r, k in zip(rows, keep, strict=True)]
    return scored_videos(spec, names, [it.video for it in items], own, targets)
