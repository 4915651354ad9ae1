"""Regression tasks (anticipation, remaining duration, a plugin's) on frozen features: k-NN and linear heads.

A task (`plstitch_eval.tasks`) gives each video's targets (frames x outputs, minutes), their bounds, its
scores and reference predictions; this module fits a head and assembles the ``plstitch.results/v1`` dict:

* **linear** - the phase probe's grid (`linear.GridTraining`: one pass, every lr x wd head, the same
  standardisation, init, batches and schedule) on the squared error of targets divided by their scale (the
  horizon; for unbounded targets the longest training target), the head of lowest validation error (the
  task's select figure, e.g. wMAE) reported on test;
* **knn** - the weighted mean of the k nearest training frames' targets (cosine, DINO's exp(sim / T)
  weights, as the k-NN vote);
* **temporal** - an MS-TCN regressing the scaled targets (`temporal/regress.py`; `causal=True` runs live),
  the epoch of lowest validation error kept.

Predictions are clipped to the task's bounds. The results hold every test video's per-frame predictions, the
task's reference rows scored the same way (`references`), and the per-class block (`per_class`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.knn_vote import KnnConfig, clamp_k, knn_search, neighbour_weights
from plstitch_eval.linear_grid import GridTraining, LinearConfig, LinearGrid, check_training_rows
from plstitch_eval.protocols.data import (
    load_train_val_test,
    load_videos,
    phase_classes,
    require_videos,
    take_subset,
)
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, over_subsets
from plstitch_eval.protocols.registry import config_record
from plstitch_eval.results_json import results_record
from plstitch_eval.splits import check_holdout, resolve_splits
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.tasks import Scored, StoreInfo, Task, TaskSettings, task_for
from plstitch_eval.temporal.fit import TemporalConfig
from plstitch_eval.utils.device import resolve_device, torch_threads

HEADS = ("knn", "linear", "temporal")
DECIMALS = 4  # per-frame predictions in the results JSON, in minutes


@dataclass(frozen=True)
class TaskData:
    """A regression task on one store: the task, its settings, the store's names and output names."""

    task: Task
    settings: TaskSettings
    info: StoreInfo
    outputs: list[str]

    @classmethod
    def of(cls, store: FeatureStore, task: Task, settings: TaskSettings) -> TaskData:
        info = StoreInfo.of(store)
        spec = task.regression
        assert spec is not None
        spec.check(info, settings)
        return cls(task, settings, info, spec.outputs(info, settings))

    def targets(self, item: VideoFeatures) -> np.ndarray:
        """The video's targets (frames x outputs, float64), checked finite."""
        assert self.task.regression is not None
        values = np.asarray(self.task.regression.targets(item, self.info, self.settings), dtype=np.float64)
        if values.shape != (len(item.features), len(self.outputs)) or not np.isfinite(values).all():
            raise EvaluationError(
                f"Task {self.task.name!r} gave targets of shape {values.shape} for video {item.video!r} "
                f"({len(item.features)} frames x {len(self.outputs)} outputs expected, all finite)."
            )
        return values

    def inputs(self, item: VideoFeatures) -> np.ndarray:
        """The head's input rows: the features, and the elapsed minutes as one more column with `elapsed`."""
        feats = np.asarray(item.features, dtype=np.float32)
        if not self.settings.elapsed:
            return feats
        elapsed = (np.asarray(item.frame_times, dtype=np.float64) / 60.0).astype(np.float32)
        return np.concatenate([feats, elapsed[:, None]], axis=1)

    def clip(self, values: np.ndarray) -> np.ndarray:
        """Predictions within the task's bounds."""
        assert self.task.regression is not None
        low, high = self.task.regression.bounds(self.info, self.settings)
        return np.clip(values, low, high)

    def score(self, preds: dict[str, np.ndarray], items: Sequence[VideoFeatures]) -> Scored:
        assert self.task.regression is not None
        truth = {item.video: self.targets(item) for item in items}
        return self.task.regression.score(preds, truth, self.info, self.settings)


# --------------------------------------------------------------------------------------------- linear head
def regression_grad(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """d/doutputs of half the squared error summed over outputs, averaged over the batch's rows:
    ``(outputs - targets) / B``; outputs [B, H, K], targets [B, K]."""
    return (outputs - targets[:, None, :]) / len(targets)


@dataclass
class LinearRegressor:
    """The trained grid, the chosen head, the target scale and every head's validation figure."""

    grid: LinearGrid
    best_head: int
    scale: float
    val_scores: list[float]

    def predict(self, inputs: np.ndarray, head: int | None = None) -> np.ndarray:
        """Unclipped predictions (minutes, frames x outputs) of one head (default: the chosen one)."""
        index = self.best_head if head is None else head
        return self.grid.logits(inputs, index).astype(np.float64) * self.scale


def train_regression_grid(
    features: np.ndarray, targets: np.ndarray, config: LinearConfig, progress: bool = False
) -> LinearGrid:
    """Every (lr, wd) head of `config` trained together on inputs [N, D] and scaled targets [N, K]."""
    check_training_rows(features, targets, "regression")
    device = resolve_device(config.device)
    with torch_threads(config.num_threads):
        run = GridTraining.start(np.asarray(features, np.float32), targets.shape[1], config, device)
        y_all = torch.from_numpy(np.asarray(targets, np.float32)).to(device)
        return run.train(
            lambda logits, idx: regression_grad(logits, y_all[idx]),
            f"regression probe ({run.num_heads} heads)",
            progress,
        )


def target_scale(data: TaskData, train_targets: Sequence[np.ndarray]) -> float:
    """What targets are divided by while a head trains: the upper bound, else the largest training target."""
    assert data.task.regression is not None
    high = data.task.regression.bounds(data.info, data.settings)[1]
    scale = float(high) if high is not None else float(max(np.abs(t).max(initial=0.0) for t in train_targets))
    return scale if scale > 0 else 1.0


def fit_linear_regressor(
    data: TaskData,
    train: Sequence[VideoFeatures],
    val: Sequence[VideoFeatures],
    config: LinearConfig,
    progress: bool = False,
) -> LinearRegressor:
    """The grid on the training frames; the head whose clipped predictions score lowest on `val`."""
    train_targets = [data.targets(item) for item in train]
    scale = target_scale(data, train_targets)
    x = np.concatenate([data.inputs(item) for item in train])
    grid = train_regression_grid(x, np.concatenate(train_targets) / scale, config, progress)
    if not val:
        raise EvaluationError("No validation videos to choose the regression probe's head on.")
    regressor = LinearRegressor(grid, 0, scale, [])
    val_inputs = {item.video: data.inputs(item) for item in val}
    for head in range(grid.num_heads):
        preds = {v: data.clip(regressor.predict(x, head)) for v, x in val_inputs.items()}
        regressor.val_scores.append(data.score(preds, val).select)
    regressor.best_head = int(np.argmin(regressor.val_scores))  # ties: the earliest head in grid order
    return regressor


# ------------------------------------------------------------------------------------------------ k-NN head
def knn_regress(
    train_inputs: np.ndarray, train_targets: np.ndarray, queries: np.ndarray, config: KnnConfig
) -> np.ndarray:
    """Each query's weighted mean of its k nearest training frames' targets (cosine similarity, the k-NN
    vote's weights), frames x outputs."""
    k = clamp_k(config.k, len(train_inputs))
    sims, idx = knn_search(
        train_inputs, queries, k, config.chunk_size, config.device, config.backend, config.num_threads
    )
    valid = idx >= 0
    weights = neighbour_weights(sims, config.temperature, config.weighting, valid)
    total = weights.sum(axis=1, keepdims=True)
    # exp weights of cosine similarities are > 0; uniform too; `similarity` may sum to <= 0: equal weights
    weights = np.where(total > 0, weights, valid.astype(np.float64))
    weights /= weights.sum(axis=1, keepdims=True)
    neighbours = np.asarray(train_targets, np.float64)[np.where(valid, idx, 0)]  # [Q, k, K]
    return np.einsum("qk,qko->qo", weights, neighbours)


# ---------------------------------------------------------------------------------------------- the protocol
def predictions_record(values: np.ndarray) -> list:
    """One video's predictions for the results JSON: per frame a value (one output) or a row (several)."""
    rounded = np.round(values, DECIMALS)
    return (rounded[:, 0] if rounded.shape[1] == 1 else rounded).tolist()


def score_references(
    data: TaskData, train: Sequence[VideoFeatures], test: Sequence[VideoFeatures]
) -> dict[str, dict[str, Any]]:
    """The task's reference rows built from `train`, scored on `test` as the probe is (clipped likewise)."""
    assert data.task.regression is not None
    rows = data.task.regression.references(train, test, data.info, data.settings)
    out = {}
    for name, (description, preds) in rows.items():
        scored = data.score({v: data.clip(np.asarray(p, np.float64)) for v, p in preds.items()}, test)
        out[name] = {"description": description, "metrics": scored.metrics, "per_video": scored.per_video}
    return out


def _results(
    data: TaskData,
    head: str,
    store: FeatureStore,
    features: str | Path,
    protocol: dict[str, Any],
    splits: dict[str, Any],
    train: Sequence[VideoFeatures],
    test: Sequence[VideoFeatures],
    preds: dict[str, np.ndarray],
) -> dict[str, Any]:
    scored = data.score(preds, test)
    results = results_record(
        data.task.results_task(head),
        store.manifest,
        features,
        {
            "name": data.task.results_task(head),
            "head": head,
            "task": data.task.name,
            **data.settings.record(),
            "outputs": data.outputs,
            **protocol,
        },
        splits,
        data.outputs,
        headline=[m for m in data.task.metrics if m in scored.metrics],
        metrics=scored.metrics,
        per_video=scored.per_video,
        predictions={v: predictions_record(p) for v, p in preds.items()},
    )
    results["per_class"] = scored.per_class
    results["references"] = score_references(data, train, test)
    return results


def task_data(store: FeatureStore, task_name: str, head: str, settings: TaskSettings) -> TaskData:
    task = task_for(task_name, head)
    if task.regression is None:
        raise ConfigError(f"--task {task_name} is not a regression task; its {head} protocol runs it.")
    if settings.elapsed and head == "knn":  # cosine neighbours of features: minutes are no direction
        raise ConfigError(
            "--elapsed adds an input column for the linear and temporal heads; k-NN takes none."
        )
    return TaskData.of(store, task, settings)


def linear_head(
    data: TaskData,
    train: Sequence[VideoFeatures],
    val: Sequence[VideoFeatures],
    test: Sequence[VideoFeatures],
    config: LinearConfig,
    progress: bool = False,
) -> tuple[dict[str, np.ndarray], dict[str, Any], LinearRegressor]:
    """The linear head fitted on `train` (chosen on `val`): test predictions, what it chose, the probe."""
    regressor = fit_linear_regressor(data, train, val, config, progress)
    preds = {item.video: data.clip(regressor.predict(data.inputs(item))) for item in test}
    lr, wd = regressor.grid.heads[regressor.best_head]
    record = {
        "select_metric": data.task.select_metric,  # the task's validation error, not the phase probe's
        "balance_classes": False,  # a regression has no classes to balance
        "target_scale_min": regressor.scale,
        "chosen_lr": lr,
        "chosen_weight_decay": wd,
        "val_scores": {
            f"lr={a:g},wd={b:g}": s
            for (a, b), s in zip(regressor.grid.heads, regressor.val_scores, strict=True)
        },
    }
    return preds, record, regressor


def knn_head(
    data: TaskData,
    train: Sequence[VideoFeatures],
    _val: Sequence[VideoFeatures],
    test: Sequence[VideoFeatures],
    config: KnnConfig,
    _progress: bool = False,
) -> tuple[dict[str, np.ndarray], dict[str, Any], None]:
    """k-NN regression with the training videos' frames as the memory bank: test predictions, k used."""
    bank = np.concatenate([data.inputs(item) for item in train])
    bank_targets = np.concatenate([data.targets(item) for item in train])
    preds = {it.video: data.clip(knn_regress(bank, bank_targets, data.inputs(it), config)) for it in test}
    return preds, {"k_used": clamp_k(config.k, len(bank))}, None


def temporal_head(
    data: TaskData,
    train: Sequence[VideoFeatures],
    val: Sequence[VideoFeatures],
    test: Sequence[VideoFeatures],
    config: TemporalConfig,
    progress: bool = False,
) -> tuple[dict[str, np.ndarray], dict[str, Any], Any]:
    """An MS-TCN regressing the scaled targets, its epoch chosen on `val`: test predictions, record, fit."""
    from plstitch_eval.temporal.regress import fit_temporal_regression

    train_targets = [data.targets(item) for item in train]
    scale = target_scale(data, train_targets)
    pairs = [(data.inputs(it), t / scale) for it, t in zip(train, train_targets, strict=True)]
    val_pairs = [(data.inputs(it), data.targets(it) / scale) for it in val]

    def val_error(preds: list[np.ndarray]) -> float:
        return data.score(
            {it.video: data.clip(p * scale) for it, p in zip(val, preds, strict=True)}, val
        ).select

    fit = fit_temporal_regression(pairs, val_pairs, val_error, config, progress)
    preds = {item.video: data.clip(fit.predict(data.inputs(item)) * scale) for item in test}
    record = {
        "select_metric": data.task.select_metric,  # the epoch is chosen on the task's validation error
        "target_scale_min": scale,
        "best_epoch": fit.best_epoch,
        "val_scores": fit.val_scores,
        "threads": fit.threads,
        "fit_device": fit.device,
    }
    return preds, record, fit


HEAD_FITS = {"knn": knn_head, "linear": linear_head, "temporal": temporal_head}  # a head by protocol name
# what a head's record overrides of its config's phase settings (a regression has no classes to balance)
HEAD_CHOICE: dict[str, dict[str, Any]] = {"linear": {"balance_classes": False}, "temporal": {}}


CHOICES = {"linear": "the linear probe chooses its head", "temporal": "the temporal probe chooses its epoch"}


def fit_validated(
    head: str,
    features: str | Path,
    task_name: str,
    settings: TaskSettings,
    config: Any,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    draw: SubsetDraw | None = None,
) -> tuple[dict[str, Any], Any, TaskData]:
    """A head that chooses on validation videos (linear, temporal) on the store's splits: its results, its fit
    (e.g. to save it) and the task data."""
    store = FeatureStore(features)
    data = task_data(store, task_name, head, settings)
    check_holdout(store, scheme, val_fraction, CHOICES[head])
    splits, validation, (train, val, test) = load_train_val_test(
        store, scheme, val_fraction, config.seed, draw
    )
    preds, record, fitted = HEAD_FITS[head](data, train, val, test, config, progress)
    protocol = {**config_record(config), "validation": validation, **record}
    return _results(data, head, store, features, protocol, splits, train, test, preds), fitted, data


def run_validated(
    head: str,
    features: str | Path,
    task_name: str,
    settings: TaskSettings,
    config: Any,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """`fit_validated`'s results; with `train_fraction`, over subsets of the training videos."""
    return over_subsets(
        lambda draw: fit_validated(
            head, features, task_name, settings, config, scheme, val_fraction, progress, draw
        )[0],
        train_fraction,
    )


def fit_linear_regression(
    features: str | Path,
    task_name: str,
    settings: TaskSettings,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    draw: SubsetDraw | None = None,
) -> tuple[dict[str, Any], LinearRegressor, TaskData]:
    """The linear regression protocol's results, its fitted probe and the task data (e.g. to save it)."""
    config = config or LinearConfig()
    return fit_validated(
        "linear", features, task_name, settings, config, scheme, val_fraction, progress, draw
    )


def run_linear_regression(
    features: str | Path,
    task_name: str,
    settings: TaskSettings,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """The linear regression protocol's results; with `train_fraction`, over training-video subsets."""
    config = config or LinearConfig()
    return run_validated(
        "linear", features, task_name, settings, config, scheme, val_fraction, progress, train_fraction
    )


def _knn_once(
    features: str | Path,
    task_name: str,
    settings: TaskSettings,
    config: KnnConfig,
    scheme: str | None,
    draw: SubsetDraw | None,
) -> dict[str, Any]:
    store = FeatureStore(features)
    data = task_data(store, task_name, "knn", settings)
    splits = resolve_splits(store, scheme)
    require_videos(splits["train"], "train", store)
    require_videos(splits["test"], "test", store)
    train = take_subset(load_videos(store, splits["train"]), draw, phase_classes(data.info.class_names))
    test = load_videos(store, splits["test"])
    preds, record, _ = knn_head(data, train, [], test, config)
    protocol = {**config_record(config), **record, "train_on": ["train"]}
    return _results(data, "knn", store, features, protocol, splits, train, test, preds)


def run_knn_regression(
    features: str | Path,
    task_name: str,
    settings: TaskSettings,
    config: KnnConfig | None = None,
    scheme: str | None = None,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """k-NN regression: the training split's frames are the memory bank, the test split is scored."""
    config = config or KnnConfig()
    run: Callable[[SubsetDraw | None], dict[str, Any]] = lambda draw: _knn_once(  # noqa: E731
        features, task_name, settings, config, scheme, draw
    )
    return over_subsets(run, train_fraction)


def run_temporal_regression(
    features: str | Path,
    task_name: str,
    settings: TaskSettings,
    config: TemporalConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """The temporal (MS-TCN) regression protocol's results; with `train_fraction`, over training-video
    subsets (`fit_validated("temporal", ...)` gives the fit too)."""
    config = config or TemporalConfig()
    return run_validated(
        "temporal", features, task_name, settings, config, scheme, val_fraction, progress, train_fraction
    )
