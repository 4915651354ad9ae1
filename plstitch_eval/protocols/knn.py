"""The k-NN protocol: training frames of the `train_on` splits vote for each test frame (DINO's protocol).

A k larger than the training frames is clamped to their number with a warning, and the results record both
(``k``, ``k_requested``). With ``relaxed=True`` (Cholec80 / M2CAI16 stores) a ``relaxed`` block of
challenge-style relaxed-boundary metrics is added beside the strict ``metrics`` (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.knn_vote import KnnConfig, knn_predict_multi
from plstitch_eval.metrics.relaxed import relaxed_metrics
from plstitch_eval.metrics.scoring import score_videos, with_relaxed
from plstitch_eval.protocols.data import (
    load_videos,
    phase_classes,
    require_two_classes,
    require_videos,
    stack_labelled,
    store_context,
    store_relaxed_spec,
    take_subset,
    used_ks,
    warn_unseen,
)
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, fraction_of, over_subsets
from plstitch_eval.protocols.registry import CvFit, Fold, Protocol, numbers_only, register_protocol
from plstitch_eval.results_json import build_results
from plstitch_eval.splits import resolve_splits
from plstitch_eval.store.features import MANIFEST, FeatureStore, VideoFeatures

TASK = "knn"


def predict_knn(
    train: Sequence[VideoFeatures],
    test: Sequence[VideoFeatures],
    num_classes: int,
    config: KnnConfig,
    ks: Sequence[int],
) -> dict[int, dict[str, np.ndarray]]:
    """Predicted class ids of every test video for each k: {k: {video: [T]}} (one search for all k)."""
    x, y = stack_labelled(train)
    queries = np.concatenate([it.features for it in test]).astype(np.float32, copy=False)
    preds = knn_predict_multi(x, y, queries, config, ks, num_classes=num_classes)
    bounds = np.cumsum([0] + [len(it.labels) for it in test])
    return {
        k: {it.video: p[bounds[i] : bounds[i + 1]] for i, it in enumerate(test)} for k, p in preds.items()
    }


def run_knn(
    features: str | Path,
    config: KnnConfig | None = None,
    extra_ks: Sequence[int] = (),
    scheme: str | None = None,
    train_on: Sequence[str] = ("train",),
    relaxed: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """k-NN protocol: training frames of `train_on` splits vote for each test frame; a results dict.

    `train_fraction`: vote with subsets of the training videos, one per seed (protocols/fractions.py).
    """
    run = partial(_run_knn, features, config, extra_ks, scheme, train_on, relaxed)
    return over_subsets(run, train_fraction)


def _run_knn(
    features: str | Path,
    config: KnnConfig | None,
    extra_ks: Sequence[int],
    scheme: str | None,
    train_on: Sequence[str],
    relaxed: bool,
    draw: SubsetDraw | None,
) -> dict[str, Any]:
    config = config or KnnConfig()
    store = FeatureStore(features)
    manifest, class_names, n_classes, bg = store_context(store)
    spec = store_relaxed_spec(store, class_names) if relaxed else None
    splits = resolve_splits(store, scheme)
    train_videos = [v for s in train_on for v in splits[s]]
    require_videos(train_videos, "train", store)
    require_videos(splits["test"], "test", store)
    train, test = load_videos(store, train_videos), load_videos(store, splits["test"])
    train = take_subset(train, draw, phase_classes(class_names))
    train_labels = stack_labelled(train)[1]
    split_names = "+".join(repr(s) for s in train_on)
    if draw is not None:
        split_names += f" at --train-fraction {draw.fraction:g} (seed {draw.seed})"
    require_two_classes(
        train_labels,
        class_names,
        f"Training split {split_names} of {store.root}",
        f"record videos of two or more classes in it ({store.root / MANIFEST}) or add splits with --train-on",
    )
    warn_unseen(train_labels, test, class_names)
    requested = list(dict.fromkeys([config.k, *extra_ks]))
    ks = list(dict.fromkeys(used_ks(requested, len(train_labels))))  # k > frames: clamped, deduplicated
    preds = predict_knn(train, test, n_classes, config, ks)
    gts = {it.video: it.labels for it in test}
    scored = {k: score_videos(preds[k], gts, n_classes, bg) for k in ks}
    protocol = {
        "name": TASK,
        **asdict(config),
        "k": ks[0],
        "k_requested": config.k,
        "ks": ks,
        "ks_requested": requested,
        "train_splits": list(train_on),
    }
    results = build_results(
        TASK, manifest, features, protocol, splits, class_names, scored[ks[0]], preds[ks[0]]
    )
    if len(requested) > 1:
        results["metrics_by_k"] = {str(k): scored[k]["metrics"] for k in ks}
    if spec is not None:
        results = with_relaxed(results, relaxed_metrics(preds[ks[0]], gts, spec))
    return results


def fit_fold(fold: Fold, config: KnnConfig, progress: bool) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """One CV fold: the fold's training frames vote (k clamped to them); the fold records the k used."""
    (k,) = used_ks([config.k], len(fold.train_labels), where=f"CV fold {fold.index}: ")
    return predict_knn(fold.train, fold.test, fold.num_classes, config, [k])[k], {"k": k}


def cv_summary(folds: list[dict[str, Any]], config: KnnConfig) -> dict[str, Any]:
    """Each fold records the k it used; the CV results' `k` is the smallest of them."""
    return {"k": min(f["k"] for f in folds), "k_requested": config.k}


def _benchmark_run(store: str | Path, config: Any, scheme: str | None) -> dict[str, Any]:
    return run_knn(store, config.knn, scheme=scheme, train_fraction=fraction_of(config))


PROTOCOL = register_protocol(
    Protocol(
        name=TASK,
        label="k-NN",
        title="k-NN",
        config_type=KnnConfig,
        section="knn",
        run=_benchmark_run,
        cv=CvFit(fit_fold, holds_out_val=False, summary=cv_summary),
        settings=lambda config: {"knn": numbers_only(config.knn)},
        card_detail=lambda record: f" (k={record['k']})" if "k" in record else "",
    )
)
