"""k-fold cross-validation by video of any protocol with a fold fit (`Protocol.cv`): `plstitch cv`.

Every video of the store's splits is tested once; each fold trains on the other videos (less the validation
videos it holds out, by video, when the protocol chooses a head or an epoch). Mean and std over folds.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.metrics.relaxed import relaxed_metrics
from plstitch_eval.metrics.scoring import score_videos, with_relaxed
from plstitch_eval.protocols.data import (
    list_videos,
    load_videos,
    phase_classes,
    require_two_classes,
    stack_labelled,
    store_context,
    store_relaxed_spec,
    take_subset,
    warn_unseen,
)
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, fraction_of, over_subsets
from plstitch_eval.protocols.registry import (
    CV_TASK,
    Fold,
    Protocol,
    config_record,
    cv_protocols,
    get_protocol,
    numbers_only,
    register_protocol,
)
from plstitch_eval.protocols.settings import default_config
from plstitch_eval.results_json import build_results
from plstitch_eval.splits import cv_videos, holdout_by_video, kfold_by_video
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.temporal.fit import TemporalConfig


def check_fold_holdout(
    videos: list[str], test_folds: list[list[str]], val_fraction: float, protocol: str, knn: bool = True
) -> None:
    """Refuse, before any fold trains, folds whose training videos cannot give validation videos.

    Why: the protocol chooses (a head, an epoch) on videos held out of each fold's training videos; a
    `val_fraction` outside (0, 1) would hold out none or all, and a fold left one training video cannot be
    split (`holdout_by_video` would only say to record a val split, which CV does not read). `knn`: whether
    the task has a k-NN head to suggest (the multi-label tasks have none).
    """
    if not 0 < val_fraction < 1:
        held = "none" if val_fraction <= 0 else "all"
        raise ConfigError(
            f"val_fraction {val_fraction:g} would hold out {held} of each CV fold's training videos, and the "
            f"{protocol} protocol chooses on held-out videos; use a value between 0 and 1 (the default 0.2)."
        )
    for i, test_videos in enumerate(test_folds):
        rest = [v for v in videos if v not in set(test_videos)]
        if len(rest) < 2:
            raise EvaluationError(
                f"CV fold {i} trains on {len(rest)} video ({', '.join(rest)}) of {len(videos)}, and the "
                f"{protocol} protocol chooses on validation videos held out of each fold's training videos: "
                f"use more --folds or more videos{', or --protocol knn (it holds out none)' if knn else ''}."
            )


def run_cv(
    features: str | Path,
    folds: int = 5,
    protocol: str = "knn",
    knn_config: KnnConfig | None = None,
    linear_config: LinearConfig | None = None,
    seed: int = 0,
    val_fraction: float = 0.2,
    relaxed: bool = False,
    temporal_config: TemporalConfig | None = None,
    progress: bool = False,
    config: Any = None,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """k-fold cross-validation by video over every video of the store's splits; mean and std over folds.

    `protocol`: any of `cv_protocols()` (knn, linear, temporal, ...); its config is `config`, else the one of
    its section (`knn_config`, `linear_config`, `temporal_config`), else its default. The ``relaxed`` block
    (when asked) is over all videos of all folds, each tested once: mean and std over videos, not folds.
    `progress`: each fold fit's bar on stderr (the linear grid's steps, the temporal model's epochs; plain
    lines off a terminal); `plstitch cv` shows it, a benchmark cell runs without (its own progress covers it).
    `train_fraction`: each fold trains on subsets of its training videos (after its validation hold-out),
    one per seed, test folds unchanged (protocols/fractions.py); mean ± std over the seeds.
    """
    args = (features, folds, protocol, knn_config, linear_config, seed, val_fraction, relaxed)
    run = partial(_run_cv, *args, temporal_config, progress, config)
    return over_subsets(run, train_fraction)


def _run_cv(
    features: str | Path,
    folds: int,
    protocol: str,
    knn_config: KnnConfig | None,
    linear_config: LinearConfig | None,
    seed: int,
    val_fraction: float,
    relaxed: bool,
    temporal_config: TemporalConfig | None,
    progress: bool,
    config: Any,
    draw: SubsetDraw | None,
) -> dict[str, Any]:
    inner = get_protocol(protocol, "protocol", cv_protocols())
    sections = {"knn": knn_config, "linear": linear_config, "temporal": temporal_config}
    cfg = config or sections.get(inner.section) or default_config(inner, seed)
    store = FeatureStore(features)
    manifest, class_names, n_classes, bg = store_context(store)
    spec = store_relaxed_spec(store, class_names) if relaxed else None
    videos = cv_videos(store)
    test_folds = kfold_by_video(videos, folds, seed)
    if inner.cv.holds_out_val:
        check_fold_holdout(videos, test_folds, val_fraction, protocol)
    items = {it.video: it for it in load_videos(store, videos)}
    require_two_classes(
        stack_labelled(list(items.values()))[1],
        class_names,
        f"Feature store {store.root}",
        "cross-validation needs videos labelled with two or more classes",
    )
    fold_results, all_preds, per_video = [], {}, {}
    for i, test_videos in enumerate(test_folds):
        rest = [v for v in videos if v not in set(test_videos)]
        test = [items[v] for v in test_videos]
        train_v, val_v = (
            holdout_by_video(rest, val_fraction, seed + i) if inner.cv.holds_out_val else (rest, [])
        )
        train = take_subset([items[v] for v in train_v], draw, phase_classes(class_names))
        train_labels = stack_labelled(train)[1]
        require_two_classes(
            train_labels,
            class_names,
            f"CV fold {i} of {store.root} (training videos {list_videos([t.video for t in train])})",
            "use fewer --folds or another --seed, so that every fold trains on two or more classes",
        )
        warn_unseen(train_labels, test, class_names)
        fold = Fold(i, train, [items[v] for v in val_v], test, n_classes, bg, train_labels)
        preds, extra = inner.cv.fit(fold, cfg, progress)
        scored = score_videos(preds, {it.video: it.labels for it in test}, n_classes, bg)
        fold_results.append({"fold": i, "test": test_videos, "metrics": scored["metrics"], **extra})
        all_preds.update(preds)
        per_video.update(scored["per_video"])
    keys = fold_results[0]["metrics"].keys()
    values = {k: np.array([f["metrics"][k] for f in fold_results], dtype=np.float64) for k in keys}
    protocol_dict = {"name": CV_TASK, "inner": protocol, "folds": folds, "seed": seed, **config_record(cfg)}
    if inner.cv.summary is not None:
        protocol_dict.update(inner.cv.summary(fold_results, cfg))
    results = build_results(
        CV_TASK,
        manifest,
        features,
        protocol_dict,
        {"folds": test_folds},
        class_names,
        {"metrics": {k: float(np.mean(v)) for k, v in values.items()}, "per_video": per_video},
        all_preds,
    )
    results["metrics_std"] = {k: float(np.std(v)) for k, v in values.items()}
    results["folds"] = fold_results
    if spec is not None:
        gts = {v: items[v].labels for v in all_preds}
        results = with_relaxed(results, relaxed_metrics(all_preds, gts, spec))
    return results


def _benchmark_run(store: str | Path, config: Any, scheme: str | None) -> dict[str, Any]:
    inner = get_protocol(config.cv_protocol, "cv-protocol", cv_protocols())
    return run_cv(
        store,
        config.cv_folds,
        config.cv_protocol,
        seed=config.cv_seed,
        val_fraction=config.val_fraction,
        config=inner.config_of(config),
        train_fraction=fraction_of(config),
    )


def _settings(config: Any) -> dict[str, Any]:
    inner = get_protocol(config.cv_protocol, "cv-protocol", cv_protocols())
    return {
        "folds": config.cv_folds,
        "inner": config.cv_protocol,
        "seed": config.cv_seed,
        config.cv_protocol: numbers_only(inner.config_of(config)),
    }


PROTOCOL = register_protocol(
    Protocol(
        name=CV_TASK, label="CV", title="Cross-validated linear probe", run=_benchmark_run, settings=_settings
    )
)
