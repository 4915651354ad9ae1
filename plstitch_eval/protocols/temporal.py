"""The temporal protocol: an MS-TCN trained on the train videos, its epoch chosen on val, scored on test.

The same steps as the linear protocol (``protocols.linear.run_linear``), with whole videos instead of
frames: splits from the store manifest; without a ``val`` split, training videos are held out **by video**
(seeded; refused, naming the flag or the manifest entry that fixes it, when ``--val-fraction`` is outside
(0, 1) or there is a single training video); a training set with labelled frames of fewer than two classes
is refused; test classes never seen in training are warned about; the test split is scored with every
metric of the other protocols and written in the same ``plstitch.results/v1`` schema (task ``temporal``;
docs/temporal.md; the multi-label tasks' MS-TCN: ``protocols/temporal_multilabel.py``, skill's temporal
head: ``protocols/skill.py``). ``run_temporal_seeds`` trains one model per seed on the same splits and reports
the mean and sample std over seeds. The protocol record names what changes the numbers besides the settings:
``threads`` (torch's CPU threads during the fit), ``device`` and ``torch`` (its version).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from plstitch_eval.errors import ConfigError
from plstitch_eval.metrics.relaxed import RelaxedSpec, relaxed_metrics
from plstitch_eval.metrics.scoring import score_videos, with_relaxed
from plstitch_eval.probes import save_probe
from plstitch_eval.protocols.data import load_train_val_test, store_context, store_relaxed_spec
from plstitch_eval.protocols.fractions import (
    SubsetDraw,
    TrainFraction,
    fraction_of,
    fraction_title,
    over_subsets,
)
from plstitch_eval.protocols.registry import CvFit, Fold, Protocol, numbers_only, register_protocol
from plstitch_eval.results_json import build_results
from plstitch_eval.splits import check_holdout
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.temporal.fit import DEFAULT_THREADS, TemporalConfig, TemporalProbeResult, fit_temporal
from plstitch_eval.utils.device import resolve_device
from plstitch_eval.utils.stats import mean_std_by_key

TASK = "temporal"


@dataclass
class TemporalData:
    """A store's videos split for the temporal protocol, checked, with what scoring needs."""

    manifest: dict[str, Any]
    class_names: list[str]
    num_classes: int
    background: list[int]
    splits: dict[str, list[str]]
    validation: str  # "official" or how the val videos were held out
    train: list[VideoFeatures]
    val: list[VideoFeatures]
    test: list[VideoFeatures]
    relaxed: RelaxedSpec | None


TEMPORAL_CHOOSES = "the temporal model chooses its epoch"  # what a missing val split stops (check_holdout)


def load_temporal_data(
    features: str | Path,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    holdout_seed: int = 0,
    relaxed: bool = False,
    draw: SubsetDraw | None = None,
) -> TemporalData:
    """Read and check the train/val/test videos of a store (val held out by video when not recorded).

    Why: one seed or many, the splits and checks are those of the linear protocol. `draw`: train on that
    subset of the training videos (`--train-fraction`).
    """
    store = FeatureStore(features)
    manifest, class_names, num_classes, background = store_context(store)
    spec = store_relaxed_spec(store, class_names) if relaxed else None
    check_holdout(store, scheme, val_fraction, TEMPORAL_CHOOSES)
    splits, validation, (train, val, test) = load_train_val_test(
        store, scheme, val_fraction, holdout_seed, draw
    )
    return TemporalData(
        manifest, class_names, num_classes, background, splits, validation, train, val, test, spec
    )


def _fit_and_score(
    data: TemporalData, config: TemporalConfig, progress: bool
) -> tuple[TemporalProbeResult, dict[str, np.ndarray], dict[str, Any]]:
    fit = fit_temporal(data.train, data.val, data.num_classes, config, progress, data.background)
    preds = {it.video: fit.predict(it.features) for it in data.test}
    gts = {it.video: it.labels for it in data.test}
    return fit, preds, score_videos(preds, gts, data.num_classes, data.background)


def _protocol(config: TemporalConfig, data: TemporalData, fit: TemporalProbeResult) -> dict[str, Any]:
    return {
        "name": TASK,
        **asdict(config),
        "device": fit.device or str(resolve_device(config.device)),
        "threads": fit.threads,
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),  # the kernels' rounding (docs/temporal.md)
        "validation": data.validation,
        "chosen_epoch": fit.best_epoch,
        "val_scores": fit.val_scores,
        "train_losses": fit.train_losses,
    }


def _results(
    features: str | Path,
    data: TemporalData,
    protocol: dict[str, Any],
    scored: dict[str, Any],
    preds: dict[str, np.ndarray],
) -> dict[str, Any]:
    return build_results(
        TASK, data.manifest, features, protocol, data.splits, data.class_names, scored, preds
    )


def _with_relaxed(
    results: dict[str, Any], data: TemporalData, preds: dict[str, np.ndarray]
) -> dict[str, Any]:
    if data.relaxed is None:
        return results
    gts = {it.video: it.labels for it in data.test}
    return with_relaxed(results, relaxed_metrics(preds, gts, data.relaxed))


def run_temporal(
    features: str | Path,
    config: TemporalConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    relaxed: bool = False,
    progress: bool = True,
    draw: SubsetDraw | None = None,
) -> tuple[dict[str, Any], TemporalProbeResult]:
    """Temporal protocol: MS-TCN on the train videos, epoch chosen on val, test scored -> (results, fit).

    `draw`: train on that subset of the training videos (one seed of `temporal_run`'s `train_fraction`).
    """
    config = config or TemporalConfig()
    data = load_temporal_data(features, scheme, val_fraction, config.seed, relaxed, draw)
    fit, preds, scored = _fit_and_score(data, config, progress)
    results = _results(features, data, _protocol(config, data, fit), scored, preds)
    return _with_relaxed(results, data, preds), fit


def run_temporal_seeds(
    features: str | Path,
    config: TemporalConfig | None = None,
    seeds: int = 3,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    relaxed: bool = False,
    progress: bool = True,
    draw: SubsetDraw | None = None,
) -> tuple[dict[str, Any], list[TemporalProbeResult]]:
    """The temporal protocol for seeds ``config.seed, +1, ...``: mean and sample std over seeds.

    Every seed trains on the same splits (a val hold-out drawn with ``config.seed``); ``metrics`` is the mean,
    ``metrics_std`` the sample std (ddof=1, absent for one seed), ``seeds`` each seed's chosen epoch and
    metrics. ``per_video``, ``predictions``, ``protocol.chosen_epoch`` / ``val_scores`` and the ``relaxed``
    block are those of the first seed.
    """
    config = config or TemporalConfig()
    if seeds < 1:
        raise ConfigError(f"--seeds must be >= 1, got {seeds}.")
    data = load_temporal_data(features, scheme, val_fraction, config.seed, relaxed, draw)
    fits, runs, first = [], [], None
    for seed in range(config.seed, config.seed + seeds):
        fit, preds, scored = _fit_and_score(data, replace(config, seed=seed), progress)
        fits.append(fit)
        runs.append({"seed": seed, "chosen_epoch": fit.best_epoch, "metrics": scored["metrics"]})
        first = first or (fit, preds, scored)
    fit, preds, scored = first
    mean, std = mean_std_by_key([run["metrics"] for run in runs])
    protocol = {**_protocol(config, data, fit), "seeds": [run["seed"] for run in runs]}
    results = _results(features, data, protocol, {**scored, "metrics": mean}, preds)
    if seeds > 1:
        results["metrics_std"] = std
    results["seeds"] = [{**run, "metrics": {k: float(v) for k, v in run["metrics"].items()}} for run in runs]
    return _with_relaxed(results, data, preds), fits


def with_threads(config: TemporalConfig, threads: int | None) -> TemporalConfig:
    """`config` with `--threads` applied: None keeps its own (a fixed 1 by default), 0 is torch's default
    (physical cores or OMP_NUM_THREADS, so the numbers follow the machine), N is N threads."""
    if threads is None:
        return config
    return replace(config, num_threads=threads or None)


@dataclass
class TemporalRun:
    """One `plstitch temporal` run: the results, the fit a probe is saved from (with seeds: the first
    seed's) and the title of its metrics table (the model's shape, epoch or seeds, device and threads)."""

    results: dict[str, Any]
    fit: TemporalProbeResult
    title: str


def temporal_run(
    features: str | Path,
    config: TemporalConfig,
    seeds: int | None = None,
    train_fraction: TrainFraction | None = None,
    **options: Any,
) -> TemporalRun:
    """`run_temporal`, or with `seeds` other than None and 1 `run_temporal_seeds` (mean ± std over seeds);
    `options`: their scheme, val_fraction and relaxed. `train_fraction`: that run on subsets of the training
    videos, one per subset seed (the metrics: mean ± std over them; the fit: the first subset's)."""
    several = seeds is not None and seeds != 1
    fits: list[TemporalProbeResult] = []

    def once(draw: SubsetDraw | None) -> dict[str, Any]:
        subset = {} if draw is None else {"draw": draw}  # no draw: exactly the call without a fraction
        if several:
            results, seed_fits = run_temporal_seeds(features, config, seeds, **options, **subset)
            fits.append(seed_fits[0])
            return results
        results, fit = run_temporal(features, config, **options, **subset)
        fits.append(fit)
        return results

    results, fit = over_subsets(once, train_fraction), fits[0]
    over = f", mean ± std over {seeds} seeds" if several else f", epoch {fit.best_epoch}"
    if train_fraction is not None and not train_fraction.full:
        over = fraction_title(train_fraction, results)  # `, 1/4 of train (3 of 12 videos), ...`
    over += f", {fit.device}, {fit.threads} thread{'' if fit.threads == 1 else 's'}"
    kind = "causal " if config.causal else ""
    shape = f"{config.stages}x{config.layers}x{config.channels}"
    return TemporalRun(results, fit, f"temporal ({kind}MS-TCN {shape}{over})")


def save_temporal_probe(
    folder: str | os.PathLike,
    features: str | os.PathLike,
    results: Mapping[str, Any],
    fitted: TemporalProbeResult,
    config: TemporalConfig,
    overwrite: bool = False,
) -> Path:
    """Save a trained MS-TCN as a ``temporal`` probe (plstitch_eval/probes.py): settings = the config whole.

    Metrics: the test metrics of that model (with seeds: the first seed's, whose predictions the results
    hold), the relaxed ones as ``relaxed_<name>``. Provenance comes from the store `features`' manifest.
    """
    seeds = results.get("seeds") or []
    metrics = dict(seeds[0]["metrics"] if seeds else results["metrics"])
    relaxed = (results.get("relaxed") or {}).get("metrics") or {}
    metrics.update({f"relaxed_{name}": value for name, value in relaxed.items()})
    store = FeatureStore(features)
    return save_probe(
        folder,
        "temporal",
        fitted.model,
        store.manifest,
        results["class_names"],
        asdict(config),
        metrics,
        overwrite,
        store=store.root,
    )


def fit_fold(
    fold: Fold, config: TemporalConfig, progress: bool
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """One CV fold: an MS-TCN on the fold's training videos, its epoch chosen on its held-out videos (the
    fold records its choice and each epoch's validation score)."""
    fit = fit_temporal(
        fold.train, fold.val, fold.num_classes, config, progress=progress, background=fold.background
    )
    extras = {"chosen_epoch": fit.best_epoch, "val_scores": fit.val_scores}
    return {it.video: fit.predict(it.features) for it in fold.test}, extras


def _benchmark_run(store: str | Path, config: Any, scheme: str | None) -> dict[str, Any]:
    options = {"scheme": scheme, "val_fraction": config.val_fraction, "progress": False}
    return over_subsets(
        lambda draw: run_temporal(store, config.temporal, draw=draw, **options)[0], fraction_of(config)
    )


def temporal_settings(config: TemporalConfig) -> dict[str, Any]:
    """The MS-TCN settings a benchmark cell is made with: its numbers, plus the thread count and device when
    they are not the defaults (unlike k-NN's, they change MS-TCN's results; docs/temporal.md), so cells made
    at the defaults keep their settings."""
    out = numbers_only(config)
    if config.num_threads != DEFAULT_THREADS:
        out["num_threads"] = config.num_threads
    if config.device != "cpu":
        out["device"] = config.device
    return out


PROTOCOL = register_protocol(
    Protocol(
        name=TASK,
        label="MS-TCN",
        title="MS-TCN on frozen features",
        config_type=TemporalConfig,
        section="temporal",
        run=_benchmark_run,
        cv=CvFit(fit_fold),
        settings=lambda config: {
            "temporal": temporal_settings(config.temporal),
            "val_fraction": config.val_fraction,
        },
        probe_kind="temporal",
        chooses=("chosen_epoch",),
    )
)
