"""Evaluation protocols on a feature store: k-NN, majority reference, linear probe, k-fold CV by video.

Splits come from the store manifest (``plstitch_eval.splits``). Without a ``val`` split, the linear probe
holds out training videos **by video** (never frames of one video on both sides). Frames labelled -1
(unlabelled) are dropped from training and scoring. Test classes never seen in training are warned about and
simply count as errors. A training set (split, held-out remainder or CV fold) with labelled frames of fewer
than two classes is refused: every probe would predict that one class. A k larger than the training frames is
clamped to their number with a warning, and the results record both (``k``, ``k_requested``). Each protocol
returns a ``plstitch.results/v1`` dict (``plstitch_eval.results_json``, docs/results-json.md). With
``relaxed=True`` (Cholec80 / M2CAI16 stores) a ``relaxed`` block of challenge-style relaxed-boundary metrics
is added beside the strict ``metrics`` (``plstitch_eval/relaxed_metrics.py``, docs/metrics.md); the strict
metrics are unchanged.
Scoring MS-TCN prediction files lives in ``plstitch_eval.score_files``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError, EvaluationError, FeatureStoreError
from plstitch_eval.features import MANIFEST, FeatureStore, VideoFeatures
from plstitch_eval.knn import KnnConfig, clamp_k, knn_predict_multi
from plstitch_eval.linear import LinearConfig, LinearProbeResult, fit_linear_probe
from plstitch_eval.relaxed_metrics import RelaxedSpec, relaxed_metrics, relaxed_spec
from plstitch_eval.results_json import SCHEMA, build_results, write_results
from plstitch_eval.score_files import MSTCN_HEADER, read_label_file, read_mapping, score_files, video_key
from plstitch_eval.scoring import (
    COOKING_METRICS,
    SURGICAL_METRICS,
    background_ids,
    default_metrics,
    score_videos,
    with_relaxed,
)
from plstitch_eval.splits import holdout_by_video, kfold_by_video, resolve_splits
from plstitch_eval.temporal.fit import TemporalConfig, fit_temporal
from plstitch_eval.utils.console import logger

__all__ = [  # the protocols, and the names this module held before splits, scoring and results moved out
    "COOKING_METRICS",
    "CV_PROTOCOLS",
    "MSTCN_HEADER",
    "SCHEMA",
    "SURGICAL_METRICS",
    "background_ids",
    "build_results",
    "check_labels",
    "check_video",
    "default_metrics",
    "fit_linear_protocol",
    "holdout_by_video",
    "kfold_by_video",
    "load_train_val_test",
    "load_videos",
    "read_label_file",
    "read_mapping",
    "require_two_classes",
    "resolve_splits",
    "run_cv",
    "run_knn",
    "run_linear",
    "run_majority",
    "score_files",
    "score_videos",
    "stack_labelled",
    "store_context",
    "store_relaxed_spec",
    "used_ks",
    "video_key",
    "with_relaxed",
    "write_results",
]

CV_PROTOCOLS = ("knn", "linear", "temporal")  # what `plstitch cv --protocol` cross-validates


# -------------------------------------------------------------------------------------------------- data
def check_video(item: VideoFeatures) -> None:
    """Refuse NaN/inf features or a video with no labelled frame, naming the video."""
    if not np.isfinite(item.features).all():
        row = int(np.flatnonzero(~np.isfinite(item.features).all(1))[0])
        raise EvaluationError(f"Video {item.video!r}: frame {row} has NaN/inf features; re-extract it.")
    if len(item.labels) == 0 or not (item.labels >= 0).any():
        raise EvaluationError(
            f"Video {item.video!r} has no labelled frames (empty ground truth); remove it from the split."
        )


def check_labels(item: VideoFeatures, store: FeatureStore, class_names: Sequence[str]) -> None:
    """Refuse labels that the manifest's `class_names` do not cover (-1 = unlabelled is allowed).

    Why: such a store would be scored with classes the results JSON cannot name, so its numbers mislead.
    """
    labels = np.asarray(item.labels)
    bad = labels[(labels < -1) | (labels >= len(class_names))]
    if len(bad):
        n = len(class_names)
        allowed = f"0..{n - 1}" if n else "none, the list is empty"
        raise FeatureStoreError(
            f"{store.path(item.video)} has label {int(bad[0])} but {store.root / MANIFEST} lists {n} "
            f"class_names (allowed labels: {allowed}, or -1 for unlabelled); add the missing names to "
            "`class_names` in the manifest or re-extract the store with `plstitch extract`."
        )


def load_videos(store: FeatureStore, videos: Sequence[str]) -> list[VideoFeatures]:
    """Read and check videos of a store: finite features, some labelled frames, labels named by the manifest.

    Why: every evaluation protocol (k-NN, linear, CV) reads its frames through here, so it checks once.
    """
    class_names = store.class_names
    items = store.read_many(videos)
    for item in items:
        check_video(item)
        check_labels(item, store, class_names)
    return items


def stack_labelled(items: Sequence[VideoFeatures]) -> tuple[np.ndarray, np.ndarray]:
    """Labelled frames of several videos as (features [N, D], labels [N])."""
    if not items:
        return np.zeros((0, 0), np.float32), np.zeros(0, np.int64)
    feats = np.concatenate([it.features[it.labels >= 0] for it in items]).astype(np.float32, copy=False)
    labels = np.concatenate([it.labels[it.labels >= 0] for it in items]).astype(np.int64)
    return feats, labels


def _class_name(class_id: int, class_names: Sequence[str]) -> str:
    return class_names[class_id] if 0 <= class_id < len(class_names) else str(class_id)


def _list_videos(videos: Sequence[str], limit: int = 5) -> str:
    """`a, b, c` or `a, b, c, ... (12 videos)`: names for a one-line message."""
    shown = ", ".join(videos[:limit])
    return shown if len(videos) <= limit else f"{shown}, ... ({len(videos)} videos)"


def require_two_classes(labels: np.ndarray, class_names: Sequence[str], what: str, fix: str) -> None:
    """Refuse training frames of fewer than two classes: one line naming `what` they come from and the `fix`.

    Why: a probe trained on one class predicts it everywhere and scores 100 on a one-class test set.
    """
    present = np.unique(labels)
    if len(present) < 2:
        found = (
            f"only one class ({_class_name(int(present[0]), class_names)!r})" if len(present) else "no class"
        )
        raise EvaluationError(
            f"{what} has labelled frames of {found}, so a probe would predict it for every frame; {fix}."
        )


def used_ks(requested: Sequence[int], n_train: int, where: str = "") -> list[int]:
    """The k each requested k uses over `n_train` training frames (``clamp_k``); warns for each clamped."""
    used = [clamp_k(k, n_train) for k in requested]
    for asked, k in zip(requested, used, strict=True):
        if k != asked:
            logger.warning("%sk=%d > %d training frames: using k=%d", where, asked, n_train, k)
    return used


def _warn_unseen(train_labels: np.ndarray, test: Sequence[VideoFeatures], class_names: Sequence[str]) -> None:
    seen = set(np.unique(train_labels).tolist())
    for item in test:
        unseen = sorted(set(np.unique(item.labels[item.labels >= 0]).tolist()) - seen)
        if unseen:
            names = [_class_name(c, class_names) for c in unseen]
            logger.warning(
                "Video %r has classes %s that no training frame has; they cannot be predicted.",
                item.video,
                names,
            )


# --------------------------------------------------------------------------------------------- protocols
def _predict_knn(
    train: Sequence[VideoFeatures], test: Sequence[VideoFeatures], num_classes: int, config: KnnConfig, ks
) -> dict[int, dict[str, np.ndarray]]:
    x, y = stack_labelled(train)
    queries = np.concatenate([it.features for it in test]).astype(np.float32, copy=False)
    preds = knn_predict_multi(x, y, queries, config, ks, num_classes=num_classes)
    bounds = np.cumsum([0] + [len(it.labels) for it in test])
    return {
        k: {it.video: p[bounds[i] : bounds[i + 1]] for i, it in enumerate(test)} for k, p in preds.items()
    }


def store_context(store: FeatureStore) -> tuple[dict[str, Any], list[str], int, list[int]]:
    """Manifest, class names, class count (>= 1) and background class ids of a store."""
    manifest = store.manifest
    class_names = list(manifest.get("class_names", []))
    return manifest, class_names, max(len(class_names), 1), background_ids(manifest, class_names)


def store_relaxed_spec(store: FeatureStore, class_names: Sequence[str]) -> RelaxedSpec:
    """Relaxed-metric settings from a store's manifest (dataset, fps), checked before any model runs."""
    manifest = store.manifest
    fix = (
        f'{store.root / MANIFEST} must record "fps" (frames per second of the stored labels); '
        "re-extract the store with plstitch extract"
    )
    return relaxed_spec(manifest.get("dataset"), class_names, manifest.get("fps"), fps_fix=fix)


def run_knn(
    features: str | Path,
    config: KnnConfig | None = None,
    extra_ks: Sequence[int] = (),
    scheme: str | None = None,
    train_on: Sequence[str] = ("train",),
    relaxed: bool = False,
) -> dict[str, Any]:
    """k-NN protocol: training frames of `train_on` splits vote for each test frame; a results dict."""
    config = config or KnnConfig()
    store = FeatureStore(features)
    manifest, class_names, n_classes, bg = store_context(store)
    spec = store_relaxed_spec(store, class_names) if relaxed else None
    splits = resolve_splits(store, scheme)
    train_videos = [v for s in train_on for v in splits[s]]
    _require(train_videos, "train", store)
    _require(splits["test"], "test", store)
    train, test = load_videos(store, train_videos), load_videos(store, splits["test"])
    train_labels = stack_labelled(train)[1]
    split_names = "+".join(repr(s) for s in train_on)
    require_two_classes(
        train_labels,
        class_names,
        f"Training split {split_names} of {store.root}",
        f"record videos of two or more classes in it ({store.root / MANIFEST}) or add splits with --train-on",
    )
    _warn_unseen(train_labels, test, class_names)
    requested = list(dict.fromkeys([config.k, *extra_ks]))
    ks = list(dict.fromkeys(used_ks(requested, len(train_labels))))  # k > frames: clamped, deduplicated
    preds = _predict_knn(train, test, n_classes, config, ks)
    gts = {it.video: it.labels for it in test}
    scored = {k: score_videos(preds[k], gts, n_classes, bg) for k in ks}
    protocol = {
        "name": "knn",
        **asdict(config),
        "k": ks[0],
        "k_requested": config.k,
        "ks": ks,
        "ks_requested": requested,
        "train_splits": list(train_on),
    }
    results = build_results(
        "knn", manifest, features, protocol, splits, class_names, scored[ks[0]], preds[ks[0]]
    )
    if len(requested) > 1:
        results["metrics_by_k"] = {str(k): scored[k]["metrics"] for k in ks}
    if spec is not None:
        results = with_relaxed(results, relaxed_metrics(preds[ks[0]], gts, spec))
    return results


def run_majority(
    features: str | Path, scheme: str | None = None, train_on: Sequence[str] = ("train",)
) -> dict[str, Any]:
    """Majority-class reference: the most frequent labelled class of the `train_on` splits predicted for
    every labelled test frame (ties: lowest class id). Why: the accuracy an encoder must beat to count.
    """
    store = FeatureStore(features)
    manifest, class_names, n_classes, _ = store_context(store)
    splits = resolve_splits(store, scheme)
    train_videos = [v for s in train_on for v in splits[s]]
    _require(train_videos, "train", store)
    _require(splits["test"], "test", store)
    train_labels = stack_labelled(load_videos(store, train_videos))[1]
    test_labels = stack_labelled(load_videos(store, splits["test"]))[1]
    majority = int(np.bincount(train_labels, minlength=n_classes).argmax())
    return {
        "task": "majority",
        "dataset": manifest.get("dataset"),
        "features": str(features),
        "train_splits": list(train_on),
        "class_id": majority,
        "class_name": class_names[majority] if majority < len(class_names) else str(majority),
        "train_frames": int(len(train_labels)),
        "test_frames": int(len(test_labels)),
        "metrics": {"accuracy": 100.0 * float(np.mean(test_labels == majority))},
    }


def _require(videos: Sequence[str], split: str, store: FeatureStore) -> None:
    if not videos:
        raise EvaluationError(
            f"{store.root}/manifest.json has no videos in split {split!r}; record splits at extraction."
        )


def _linear_on(
    train: Sequence[VideoFeatures],
    val: Sequence[VideoFeatures],
    test: Sequence[VideoFeatures],
    n_classes: int,
    config: LinearConfig,
):
    x, y = stack_labelled(train)
    vx, vy = stack_labelled(val)
    probe = fit_linear_probe(x, y, vx, vy, n_classes, config)
    preds = {it.video: probe.predict(it.features) for it in test}
    return probe, preds


def run_linear(
    features: str | Path,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    relaxed: bool = False,
) -> dict[str, Any]:
    """Linear protocol: grid on train, head chosen on val (official or held out by video), report on test."""
    return fit_linear_protocol(features, config, scheme, val_fraction, relaxed)[0]


def load_train_val_test(
    store: FeatureStore, scheme: str | None, val_fraction: float, seed: int
) -> tuple[dict[str, list[str]], str, tuple[list[VideoFeatures], list[VideoFeatures], list[VideoFeatures]]]:
    """Splits, where validation came from, and the checked train/val/test videos of a trained probe.

    Why: the linear and temporal protocols share these rules - validation videos held out of train **by
    video** when the store records no val split, two or more training classes, unseen test classes warned.
    """
    class_names = store_context(store)[1]
    splits = resolve_splits(store, scheme)
    _require(splits["train"], "train", store)
    _require(splits["test"], "test", store)
    validation = "official"
    what = f"Training split 'train' of {store.root}"
    fix = f"record videos of two or more classes in it ({store.root / MANIFEST})"
    if not splits["val"]:
        splits["train"], splits["val"] = holdout_by_video(splits["train"], val_fraction, seed)
        validation = f"held out by video ({val_fraction:.0%} of train, seed {seed})"
        what = f"{what}, less the videos held out for validation ({_list_videos(splits['val'])}),"
        fix = f"{fix}, or record a 'val' split there, or lower --val-fraction"
    train, val, test = (load_videos(store, splits[s]) for s in ("train", "val", "test"))
    train_labels = stack_labelled(train)[1]
    require_two_classes(train_labels, class_names, what, fix)
    _warn_unseen(train_labels, test, class_names)
    return splits, validation, (train, val, test)


def fit_linear_protocol(
    features: str | Path,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    relaxed: bool = False,
) -> tuple[dict[str, Any], LinearProbeResult]:
    """`run_linear`'s results dict and the fitted probe (grid + chosen head), e.g. to save the probe.

    The test predictions in the results are the probe's (`probe.predict`) on each test video.
    """
    config = config or LinearConfig()
    store = FeatureStore(features)
    manifest, class_names, n_classes, bg = store_context(store)
    spec = store_relaxed_spec(store, class_names) if relaxed else None
    splits, val_source, (train, val, test) = load_train_val_test(store, scheme, val_fraction, config.seed)
    probe, preds = _linear_on(train, val, test, n_classes, config)
    gts = {it.video: it.labels for it in test}
    scored = score_videos(preds, gts, n_classes, bg)
    protocol = {
        "name": "linear",
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "validation": val_source,
        "chosen_lr": probe.best_lr,
        "chosen_weight_decay": probe.best_weight_decay,
        "val_scores": {
            f"lr={lr:g},wd={wd:g}": s for (lr, wd), s in zip(probe.grid.heads, probe.val_scores, strict=True)
        },
    }
    results = build_results("linear", manifest, features, protocol, splits, class_names, scored, preds)
    return (results if spec is None else with_relaxed(results, relaxed_metrics(preds, gts, spec))), probe


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
) -> dict[str, Any]:
    """k-fold cross-validation by video over every video of the store's splits; mean and std over folds.

    `protocol`: knn, linear or temporal (linear and temporal hold validation videos out of each fold's
    training videos). The ``relaxed`` block (when asked) is over all videos of all folds, each tested once:
    mean and std over videos, not folds. `progress`: the temporal model's epoch bar.
    """
    if protocol not in CV_PROTOCOLS:
        raise ConfigError(f"--protocol must be one of {', '.join(CV_PROTOCOLS)}, got {protocol!r}.")
    store = FeatureStore(features)
    manifest, class_names, n_classes, bg = store_context(store)
    spec = store_relaxed_spec(store, class_names) if relaxed else None
    recorded = resolve_splits(store)
    videos = sorted({v for s in recorded.values() for v in s}) or store.videos()
    test_folds = kfold_by_video(videos, folds, seed)
    items = {it.video: it for it in load_videos(store, videos)}
    require_two_classes(
        stack_labelled(list(items.values()))[1],
        class_names,
        f"Feature store {store.root}",
        "cross-validation needs videos labelled with two or more classes",
    )
    knn_config, linear_config = knn_config or KnnConfig(), linear_config or LinearConfig(seed=seed)
    temporal_config = temporal_config or TemporalConfig(seed=seed)
    fold_results, all_preds, per_video = [], {}, {}
    for i, test_videos in enumerate(test_folds):
        rest = [v for v in videos if v not in set(test_videos)]
        test = [items[v] for v in test_videos]
        train_v, val_v = (rest, []) if protocol == "knn" else holdout_by_video(rest, val_fraction, seed + i)
        train = [items[v] for v in train_v]
        train_labels = stack_labelled(train)[1]
        require_two_classes(
            train_labels,
            class_names,
            f"CV fold {i} of {store.root} (training videos {_list_videos(train_v)})",
            "use fewer --folds or another --seed, so that every fold trains on two or more classes",
        )
        _warn_unseen(train_labels, test, class_names)
        extra: dict[str, Any] = {}
        if protocol == "knn":
            (k,) = used_ks([knn_config.k], len(train_labels), where=f"CV fold {i}: ")
            preds = _predict_knn(train, test, n_classes, knn_config, [k])[k]
            extra = {"k": k}
        elif protocol == "linear":
            probe, preds = _linear_on(train, [items[v] for v in val_v], test, n_classes, linear_config)
            extra = {"chosen_lr": probe.best_lr, "chosen_weight_decay": probe.best_weight_decay}
        else:
            val = [items[v] for v in val_v]
            fit = fit_temporal(train, val, n_classes, temporal_config, progress=progress, background=bg)
            preds = {it.video: fit.predict(it.features) for it in test}
            extra = {"chosen_epoch": fit.best_epoch}
        scored = score_videos(preds, {it.video: it.labels for it in test}, n_classes, bg)
        fold_results.append({"fold": i, "test": test_videos, "metrics": scored["metrics"], **extra})
        all_preds.update(preds)
        per_video.update(scored["per_video"])
    keys = fold_results[0]["metrics"].keys()
    values = {k: np.array([f["metrics"][k] for f in fold_results], dtype=np.float64) for k in keys}
    cfg = {"knn": knn_config, "linear": linear_config, "temporal": temporal_config}[protocol]
    protocol_dict = {
        "name": "cv",
        "inner": protocol,
        "folds": folds,
        "seed": seed,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()},
    }
    if protocol == "knn":  # each fold records the k it used; `k` is the smallest of them
        protocol_dict["k"] = min(f["k"] for f in fold_results)
        protocol_dict["k_requested"] = knn_config.k
    results = build_results(
        "cv",
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
