"""The linear multi-label probe of any multi-label task (tools, triplets): one logistic per label column.

The task's `MultiLabel` (`tasks/registry.py`) says which stored rows are its targets and how its metrics are
computed; this module fits them. One logistic per column, class-balanced (positives weighted by negatives /
positives of that column, as `BCEWithLogitsLoss(pos_weight=...)`), trained as a grid of learning rates x
weight decays in one pass with the phase probe's `linear.GridTraining` (the same standardisation,
initialisation, batches, optimiser step and cosine schedule); the head with the best validation value of the
task's `select_metric` is scored on the test frames (those whose row is annotated, no -1).
`fit_multilabel_linear` also returns the grid and its chosen head, which `--save` keeps as a probe
(`multilabel_probe.py`); `fit_loaded` is the fit on loaded videos that each CV fold runs (`multilabel_cv.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from plstitch_eval.errors import EvaluationError
from plstitch_eval.linear_grid import (
    GridTraining,
    LinearConfig,
    LinearGrid,
    LinearProbeResult,
    check_training_rows,
)
from plstitch_eval.protocols.data import check_label_rows, check_soft_rows, take_subset
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, over_subsets
from plstitch_eval.results_json import results_record
from plstitch_eval.splits import check_holdout, holdout_by_video, resolve_splits
from plstitch_eval.store.features import MANIFEST, FeatureStore, VideoFeatures
from plstitch_eval.tasks.registry import MultiLabel, Task, get_task
from plstitch_eval.utils.device import resolve_device, torch_threads

Rows = Callable[[VideoFeatures], "np.ndarray | None"]
# metrics, each test video's own (`MultiLabel.per_video`), each test video's stored probabilities
Scored = tuple[dict[str, Any], dict[str, dict[str, Any]], dict[str, list[list[float]]]]


@dataclass(frozen=True)
class VideoRows:
    """One video's annotated frames: features [F, D] float32 and targets [F, K] (0/1 int8, or float32
    fractions of a soft task)."""

    video: str
    features: np.ndarray
    targets: np.ndarray


def annotated_rows(items: Sequence[VideoFeatures], rows_of: Rows, soft: bool = False) -> list[VideoRows]:
    """Each video's frames whose label row is fully annotated (no -1, no NaN); videos without rows are
    skipped. `soft`: the targets stay fractions (float32), else 0/1 (int8)."""
    out = []
    for item in items:
        rows = rows_of(item)
        if rows is None:
            continue
        keep = (np.isfinite(rows) & (rows >= 0)).all(axis=1)
        targets = rows[keep].astype(np.float32 if soft else np.int8)
        out.append(VideoRows(item.video, item.features[keep].astype(np.float32), targets))
    return out


def pooled(videos: Sequence[VideoRows]) -> tuple[np.ndarray, np.ndarray]:
    """(features [N, D], targets [N, K]) of several videos' annotated frames, in video order."""
    if not videos:
        return np.zeros((0, 0), np.float32), np.zeros((0, 0), np.int8)
    return np.concatenate([v.features for v in videos]), np.concatenate([v.targets for v in videos])


def positive_weights(targets: np.ndarray) -> np.ndarray:
    """Per-column weight of a positive frame: negatives / positives (1 for a column lacking either)."""
    pos = targets.sum(0).astype(np.float64)
    neg = len(targets) - pos
    return np.where((pos > 0) & (neg > 0), neg / np.maximum(pos, 1), 1.0)


def multilabel_grad(logits: torch.Tensor, targets: torch.Tensor, pos_weight: torch.Tensor) -> torch.Tensor:
    """d/dlogits of the mean class-balanced binary cross-entropy over frames and columns (closed form):
    ``(pos_weight * y * (sigmoid - 1) + (1 - y) * sigmoid) / (N * K)``; logits [N, ..., K], targets [N, K]."""
    y = targets.view(len(targets), *([1] * (logits.dim() - 2)), -1)
    prob = torch.sigmoid(logits)
    grad = pos_weight * y * (prob - 1.0) + (1.0 - y) * prob
    return grad / (len(targets) * targets.shape[-1])


def train_multilabel_grid(
    features: np.ndarray,
    targets: np.ndarray,
    config: LinearConfig | None = None,
    progress: bool = False,
    what: str = "tool",
) -> LinearGrid:
    """Train every (lr, wd) head of `config` together on features [N, D] and 0/1 targets [N, K].

    `progress`: a bar over the steps on stderr, as the phase probe's (plain lines every few seconds when
    stderr is a file; muted by --quiet); `what` names the probe there and in errors (`tool`, `triplet`).
    """
    config = config or LinearConfig()
    features = np.asarray(features, dtype=np.float32)
    targets = np.asarray(targets, dtype=np.float32)
    check_training_rows(features, targets, what)
    device = resolve_device(config.device)
    with torch_threads(config.num_threads):
        run = GridTraining.start(features, targets.shape[1], config, device)
        y_all = torch.from_numpy(targets).to(device)
        pos_weight = torch.from_numpy(positive_weights(targets)).float().to(device)
        if not config.balance_classes:
            pos_weight = torch.ones_like(pos_weight)
        return run.train(
            lambda logits, idx: multilabel_grad(logits, y_all[idx], pos_weight),
            f"{what} probe ({run.num_heads} heads)",
            progress,
        )


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """Presence probabilities of logits (numerically stable)."""
    return 0.5 * (1.0 + np.tanh(0.5 * logits))


def noun(spec: MultiLabel) -> str:
    """What one label column is called in messages: `tool` for `tool_names`."""
    return spec.names_key.removesuffix("_names")


def multilabel_spec(task: Task) -> MultiLabel:
    """The task's `MultiLabel`; one line when it has none (a multi-label task a plugin left without one)."""
    if task.multilabel is None:
        raise EvaluationError(
            f"--task {task.name} gives no MultiLabel (its labels and scoring), so no probe can fit it; "
            "its package must pass Task(multilabel=MultiLabel(...))."
        )
    return task.multilabel


def label_names(store: FeatureStore, task: Task) -> list[str]:
    """The store's names of the task's columns; one line naming the manifest and the fix when it has none."""
    spec = multilabel_spec(task)
    names = list(store.manifest.get(spec.names_key) or [])
    if not names:
        what = noun(spec)
        raise EvaluationError(
            f"{store.root / MANIFEST} records no {what} names: its dataset has no {what} annotations "
            f"({spec.missing})."
        )
    return names


def load_labelled(
    store: FeatureStore, videos: list[str], split: str, spec: MultiLabel
) -> list[VideoFeatures]:
    """Read `videos` of the store, refusing damaged label rows or a video without them (one line each)."""
    items, what = store.read_many(videos), noun(spec)
    check = check_soft_rows if spec.soft else check_label_rows
    for item in items:
        check(item, store, spec.labels(item), what)
    lacking = [it.video for it in items if spec.labels(it) is None]
    if lacking:
        named = ", ".join(lacking[:5]) + (" ..." if len(lacking) > 5 else "")
        raise EvaluationError(
            f"{split} videos {named} of {store.root} have no {what} labels (extracted before {what} labels "
            f"were kept, or their {what} file was missing); extract them again with plstitch extract "
            "--overwrite."
        )
    return items


def shown_classes(names: list[str], spec: MultiLabel) -> Callable[[VideoFeatures], list[str]]:
    """The columns a video shows in some annotated frame, by name: what a training subset must cover."""

    def shown(item: VideoFeatures) -> list[str]:
        rows = spec.labels(item)
        if rows is None:
            return []
        return [name for name, on in zip(names, (rows >= 0.5).any(0), strict=True) if on]

    return shown


def run_multilabel_linear(
    task: str | Task,
    features: str | Path,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """A multi-label task's linear protocol: the grid on train, the head of best validation
    `select_metric`, the task's metrics on test (results task `task.results_task("linear")`).

    `train_fraction`: the grid on subsets of the training videos, one per seed (protocols/fractions.py); a
    subset covers the columns (one counts in a video with a frame showing it) as a phase subset the phases.
    """
    task = get_task(task) if isinstance(task, str) else task
    multilabel_spec(task)
    run = partial(_run, task, features, config, scheme, val_fraction, progress)
    return over_subsets(lambda draw: run(draw)[0], train_fraction)


def fit_multilabel_linear(
    task: str | Task,
    features: str | Path,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
) -> tuple[dict[str, Any], LinearProbeResult]:
    """`run_multilabel_linear` on all the training videos, with the grid and its chosen head (what
    `--save` keeps: `protocols.multilabel_probe.save_multilabel_probe`)."""
    task = get_task(task) if isinstance(task, str) else task
    multilabel_spec(task)
    return _run(task, features, config, scheme, val_fraction, progress, None)


@dataclass(frozen=True)
class LinearFit:
    """The grid fitted on loaded videos and its chosen head, the test figures (`MultiLabel.score`), each test
    video's stored probabilities, and what the choice saw: annotated frames per split, labels no test frame
    shows."""

    fitted: LinearProbeResult
    metrics: dict[str, Any]
    per_video: dict[str, dict[str, Any]]
    predictions: dict[str, list[list[float]]]
    frames: dict[str, int]
    without_positives: list[str]

    def choice(self) -> dict[str, Any]:
        """The chosen head and every head's validation score, as the results' `protocol` records them."""
        grid, scores = self.fitted.grid, self.fitted.val_scores
        return {
            "chosen_lr": self.fitted.best_lr,
            "chosen_weight_decay": self.fitted.best_weight_decay,
            "val_scores": {f"lr={a:g},wd={b:g}": s for (a, b), s in zip(grid.heads, scores, strict=True)},
        }


def absent_labels(names: Sequence[str], targets: np.ndarray) -> list[str]:
    """The labels no row of `targets` [N, K] shows (a soft row counts from 0.5)."""
    return [n for n, on in zip(names, (targets >= 0.5).any(0), strict=True) if not on]


def fit_loaded(
    task: Task,
    names: list[str],
    parts: dict[str, list[VideoFeatures]],
    config: LinearConfig,
    progress: bool = False,
    where: str = "the store",
) -> LinearFit:
    """The grid on `parts["train"]`'s annotated frames, the head of best validation `select_metric` on
    `parts["val"]`'s, scored on `parts["test"]`'s: what one split and each CV fold (`multilabel_cv.py`) run.
    `where` names the videos' store (and fold) in the one line refusing a split without annotated frames."""
    spec = multilabel_spec(task)
    rows = {s: [v for v in annotated_rows(parts[s], spec.labels, spec.soft) if len(v.targets)] for s in parts}
    (x_tr, y_tr), (x_va, _), (x_te, y_te) = (pooled(rows[s]) for s in ("train", "val", "test"))
    for split, x in (("train", x_tr), ("val", x_va), ("test", x_te)):
        if not len(x):
            raise EvaluationError(f"The {split} split of {where} has no {noun(spec)}-annotated frames.")
    grid = train_multilabel_grid(x_tr, y_tr, config, progress, noun(spec))
    val_targets = [v.targets for v in rows["val"]]
    val_scores = [
        spec.score(_by_video(sigmoid(z), rows["val"]), val_targets, names)[task.select_metric]
        for z in grid.logits(x_va)
    ]
    best = int(np.nanargmax(val_scores)) if not np.isnan(val_scores).all() else 0
    metrics, per_video, predictions = _test_scores(task, spec, grid, best, rows["test"], names)
    return LinearFit(
        LinearProbeResult(grid, best, [float(v) for v in val_scores]),
        metrics,
        per_video,
        predictions,
        {"train": len(x_tr), "val": len(x_va), "test": len(x_te)},
        absent_labels(names, y_te),
    )


def _run(
    task: Task,
    features: str | Path,
    config: LinearConfig | None,
    scheme: str | None,
    val_fraction: float,
    progress: bool,
    draw: SubsetDraw | None,
) -> tuple[dict[str, Any], LinearProbeResult]:
    config = config or LinearConfig(balance_classes=True)
    spec, results_task = multilabel_spec(task), task.results_task("linear")
    store = FeatureStore(features)
    names = label_names(store, task)
    check_holdout(store, scheme, val_fraction, f"the {noun(spec)} probe chooses its head")
    splits = resolve_splits(store, scheme)
    validation = "official"
    if not splits["val"]:
        splits["train"], splits["val"] = holdout_by_video(splits["train"], val_fraction, config.seed)
        validation = f"held out by video ({val_fraction:.0%} of train, seed {config.seed})"
    parts = {s: load_labelled(store, splits[s], s, spec) for s in ("train", "val", "test")}
    parts["train"] = take_subset(parts["train"], draw, shown_classes(names, spec))
    fit = fit_loaded(task, names, parts, config, progress, str(store.root))
    protocol = {
        "name": results_task,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "select_metric": task.select_metric,  # whatever the phase probe's setting
        "validation": validation,
        **fit.choice(),
        "frames": fit.frames,
        f"{task.name}_without_positives": fit.without_positives,
    }
    results = results_record(
        results_task,
        store.manifest,
        features,
        protocol,
        splits,
        names,
        headline=list(task.metrics),
        metrics=fit.metrics,
        per_video=fit.per_video,
        predictions=fit.predictions,  # probabilities of each test video's annotated frames
    )
    return results, fit.fitted


def _by_video(scores: np.ndarray, videos: Sequence[VideoRows]) -> list[np.ndarray]:
    """Pooled per-frame scores split back into one array per video."""
    return np.split(scores, np.cumsum([len(v.targets) for v in videos])[:-1])


def _test_scores(
    task: Task, spec: MultiLabel, grid: LinearGrid, best: int, videos: list[VideoRows], names: list[str]
) -> Scored:
    """The head's metrics on the test frames, each test video's own and its stored probabilities."""
    own = [sigmoid(grid.logits(v.features, best)) for v in videos]  # the test logits, computed once
    return scored_videos(spec, names, [v.video for v in videos], own, [v.targets for v in videos])


def scored_videos(
    spec: MultiLabel, names: list[str], videos: list[str], own: list[np.ndarray], targets: list[np.ndarray]
) -> Scored:
    """The task's metrics of test videos' probabilities `own` against `targets` (annotated frames), each
    video's own (`spec.per_video`) and its stored probabilities (rounded to `spec.decimals`).

    With `score_stored` every figure comes from the stored (rounded) probabilities, so the predictions give
    them again exactly; otherwise from the unrounded ones (the tool probe, as it always did). The linear and
    the temporal multi-label protocols share it.
    """
    stored = [np.round(s, spec.decimals) for s in own]
    scored = stored if spec.score_stored else own
    metrics = spec.score(scored, targets, names)
    per_video = {}
    for video, s, y in zip(videos, scored, targets, strict=True):
        alone = spec.score([s], [y], names)
        per_video[video] = {k: alone[k] for k in spec.per_video}
    return metrics, per_video, {v: s.tolist() for v, s in zip(videos, stored, strict=True)}
