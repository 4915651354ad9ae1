"""The linear protocol: a grid of linear heads trained on train, the head chosen on val, reported on test.

Without a ``val`` split, training videos are held out **by video** (never frames of one video on both
sides). With ``relaxed=True`` the relaxed-boundary block is added beside the strict metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.linear_grid import LinearConfig, LinearProbeResult, fit_linear_probe
from plstitch_eval.metrics.relaxed import relaxed_metrics
from plstitch_eval.metrics.scoring import score_videos, with_relaxed
from plstitch_eval.protocols.data import (
    load_train_val_test,
    stack_labelled,
    store_context,
    store_relaxed_spec,
)
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, fraction_of, over_subsets
from plstitch_eval.protocols.registry import (
    CvFit,
    Fold,
    Protocol,
    config_record,
    numbers_only,
    register_protocol,
)
from plstitch_eval.results_json import build_results
from plstitch_eval.splits import check_holdout
from plstitch_eval.store.features import FeatureStore, VideoFeatures

TASK = "linear"


def linear_on(
    train: Sequence[VideoFeatures],
    val: Sequence[VideoFeatures],
    test: Sequence[VideoFeatures],
    n_classes: int,
    config: LinearConfig,
    progress: bool = False,
) -> tuple[LinearProbeResult, dict[str, np.ndarray]]:
    """The probe fitted on `train` (head chosen on `val`) and its predicted class ids of each test video.

    `progress`: the grid's bar over its steps on stderr (plain lines every few seconds off a terminal).
    """
    x, y = stack_labelled(train)
    vx, vy = stack_labelled(val)
    probe = fit_linear_probe(x, y, vx, vy, n_classes, config, progress)
    preds = {it.video: probe.predict(it.features) for it in test}
    return probe, preds


def run_linear(
    features: str | Path,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    relaxed: bool = False,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """Linear protocol: grid on train, head chosen on val (official or held out by video), report on test.

    `train_fraction`: the grid on subsets of the training videos, one per seed (protocols/fractions.py).
    """
    return over_subsets(
        lambda draw: fit_linear_protocol(features, config, scheme, val_fraction, relaxed, progress, draw)[0],
        train_fraction,
    )


def fit_linear_protocol(
    features: str | Path,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    relaxed: bool = False,
    progress: bool = False,
    draw: SubsetDraw | None = None,
) -> tuple[dict[str, Any], LinearProbeResult]:
    """`run_linear`'s results dict and the fitted probe (grid + chosen head), e.g. to save the probe.

    The test predictions in the results are the probe's (`probe.predict`) on each test video. `progress`:
    the grid's bar on stderr (`plstitch linear`; a benchmark cell runs without, under its own progress).
    `draw`: train on that subset of the training videos (one seed of `run_linear`'s `train_fraction`).
    """
    config = config or LinearConfig()
    store = FeatureStore(features)
    manifest, class_names, n_classes, bg = store_context(store)
    spec = store_relaxed_spec(store, class_names) if relaxed else None
    check_holdout(store, scheme, val_fraction, "the linear probe chooses its head")
    splits, val_source, (train, val, test) = load_train_val_test(
        store, scheme, val_fraction, config.seed, draw
    )
    probe, preds = linear_on(train, val, test, n_classes, config, progress)
    gts = {it.video: it.labels for it in test}
    scored = score_videos(preds, gts, n_classes, bg)
    protocol = {
        "name": TASK,
        **config_record(config),
        "validation": val_source,
        "chosen_lr": probe.best_lr,
        "chosen_weight_decay": probe.best_weight_decay,
        "val_scores": val_scores(probe),
    }
    results = build_results(TASK, manifest, features, protocol, splits, class_names, scored, preds)
    return (results if spec is None else with_relaxed(results, relaxed_metrics(preds, gts, spec))), probe


def val_scores(probe: LinearProbeResult) -> dict[str, float]:
    """Each head's validation score by its `lr=...,wd=...` name: what the choice was made on."""
    return {f"lr={lr:g},wd={wd:g}": s for (lr, wd), s in zip(probe.grid.heads, probe.val_scores, strict=True)}


def fit_fold(
    fold: Fold, config: LinearConfig, progress: bool
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """One CV fold: the grid on the fold's training videos, the head chosen on its held-out videos (the
    fold records its choice and every head's validation score)."""
    probe, preds = linear_on(fold.train, fold.val, fold.test, fold.num_classes, config, progress)
    return preds, {
        "chosen_lr": probe.best_lr,
        "chosen_weight_decay": probe.best_weight_decay,
        "val_scores": val_scores(probe),
    }


def _benchmark_run(store: str | Path, config: Any, scheme: str | None) -> dict[str, Any]:
    return run_linear(
        store,
        config.linear,
        scheme=scheme,
        val_fraction=config.val_fraction,
        train_fraction=fraction_of(config),
    )


PROTOCOL = register_protocol(
    Protocol(
        name=TASK,
        label="linear",
        title="Linear probe",
        config_type=LinearConfig,
        section="linear",
        run=_benchmark_run,
        cv=CvFit(fit_fold),
        settings=lambda config: {"linear": numbers_only(config.linear), "val_fraction": config.val_fraction},
        probe_kind="linear",
        chooses=("chosen_lr", "chosen_weight_decay"),
    )
)
