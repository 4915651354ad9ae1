"""Evaluation protocols on a feature store: splits, k-NN, linear probe, k-fold CV by video, results JSON.

Splits come from the store manifest (``splits`` = ``{"train": [...], "val": [...], "test": [...]}`` or
``{scheme: {"train": ..., ...}}``). Without a ``val`` split, the linear probe holds out training videos
**by video** (never frames of one video on both sides). Frames labelled -1 (unlabelled) are dropped from
training and scoring. Test classes never seen in training are warned about and simply count as errors.
A training set (split, held-out remainder or CV fold) with labelled frames of fewer than two classes is
refused: every probe would predict that one class. A k larger than the training frames is clamped to
their number with a warning, and the results record both (``k``, ``k_requested``).
The results JSON is documented in ``docs/results-json.md``. With ``relaxed=True`` (Cholec80 / M2CAI16
stores) a ``relaxed`` block of challenge-style relaxed-boundary metrics is added beside the strict
``metrics`` (``plstitch_eval/relaxed_metrics.py``, docs/metrics.md); the strict metrics are unchanged.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval import __version__
from plstitch_eval.errors import ConfigError, EvaluationError, FeatureStoreError
from plstitch_eval.features import MANIFEST, FeatureStore, VideoFeatures
from plstitch_eval.knn import KnnConfig, clamp_k, knn_predict_multi
from plstitch_eval.linear import LinearConfig, LinearProbeResult, fit_linear_probe
from plstitch_eval.metrics import DEFAULT_OVERLAPS, frame_metrics, segment_metrics
from plstitch_eval.relaxed_metrics import RelaxedSpec, relaxed_metrics, relaxed_spec
from plstitch_eval.temporal.fit import TemporalConfig, fit_temporal
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import write_json_output

SCHEMA = "plstitch.results/v1"
COOKING_DATASETS = ("gtea", "breakfast", "50salads")
DEFAULT_BACKGROUND = {"gtea": ("background",), "breakfast": (), "50salads": ("action_start", "action_end")}
SURGICAL_METRICS = ("accuracy", "macro_f1_pooled", "macro_f1_video")
COOKING_METRICS = ("accuracy", "edit", "f1@10", "f1@25", "f1@50")
CV_PROTOCOLS = ("knn", "linear", "temporal")  # what `plstitch cv --protocol` cross-validates


def default_metrics(dataset: str | None) -> tuple[str, ...]:
    """Headline metrics: cooking -> accuracy, Edit, F1@{10,25,50}; surgical -> accuracy + macro F1 x2."""
    return COOKING_METRICS if _family(dataset) == "cooking" else SURGICAL_METRICS


def _family(dataset: str | None) -> str:
    name = (dataset or "").lower()
    return "cooking" if any(name.startswith(c) for c in COOKING_DATASETS) else "surgical"


def background_ids(manifest: dict[str, Any], class_names: Sequence[str]) -> list[int]:
    """Class ids dropped from segment metrics: manifest ``background_classes`` else the dataset default."""
    names = manifest.get("background_classes")
    if names is None:
        names = DEFAULT_BACKGROUND.get((manifest.get("dataset") or "").lower(), ())
    ids = []
    for name in names:
        if isinstance(name, int):
            ids.append(name)
        elif name in class_names:
            ids.append(list(class_names).index(name))
    return ids


# ------------------------------------------------------------------------------------------------ splits
def resolve_splits(store: FeatureStore, scheme: str | None = None) -> dict[str, list[str]]:
    """Train/val/test video lists of the store, for a named scheme when the manifest holds several.

    Reads ``split_schemes[scheme]`` when a scheme is named and recorded, else ``splits`` (flat or by scheme).
    """
    manifest = store.manifest
    schemes = manifest.get("split_schemes") or {}
    if scheme is not None and scheme in schemes:
        raw = schemes[scheme]
        return {s: list(raw.get(s, [])) for s in ("train", "val", "test")}
    if scheme is not None and scheme == manifest.get("split_scheme"):
        scheme = None
    raw = manifest.get("splits") or {}
    if raw and all(isinstance(v, dict) for v in raw.values()):
        if scheme is None:
            scheme = next(iter(raw))
        if scheme not in raw:
            raise ConfigError(
                f"{store.root}/manifest.json has no split scheme {scheme!r}; recorded: {sorted(raw)}."
            )
        raw = raw[scheme]
    elif scheme is not None and scheme not in raw:
        raise ConfigError(f"{store.root}/manifest.json records one split set, not scheme {scheme!r}.")
    splits = {k: list(v) for k, v in raw.items() if isinstance(v, list)}
    return {"train": splits.get("train", []), "val": splits.get("val", []), "test": splits.get("test", [])}


def holdout_by_video(
    videos: Sequence[str], fraction: float = 0.2, seed: int = 0
) -> tuple[list[str], list[str]]:
    """Split videos into (train, val) with round(fraction * n) >= 1 videos held out, seeded."""
    videos = list(videos)
    if len(videos) < 2:
        raise EvaluationError(
            f"Need >= 2 training videos to hold some out for validation, got {len(videos)}; "
            "record a val split in the store."
        )
    n_val = min(max(1, round(fraction * len(videos))), len(videos) - 1)
    order = np.random.default_rng(seed).permutation(len(videos))
    val = sorted(videos[i] for i in order[:n_val])
    return [v for v in videos if v not in set(val)], val


def kfold_by_video(videos: Sequence[str], folds: int = 5, seed: int = 0) -> list[list[str]]:
    """Partition videos into `folds` seeded, near-equal test folds (each video in exactly one)."""
    videos = list(videos)
    if folds < 2 or folds > len(videos):
        raise ConfigError(f"--folds must be between 2 and the number of videos ({len(videos)}), got {folds}.")
    order = np.random.default_rng(seed).permutation(len(videos))
    return [sorted(videos[i] for i in part) for part in np.array_split(order, folds)]


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


def score_videos(
    preds: dict[str, np.ndarray],
    gts: dict[str, np.ndarray],
    num_classes: int,
    bg_ids: Sequence[int] = (),
    overlaps: Sequence[float] = DEFAULT_OVERLAPS,
) -> dict[str, Any]:
    """Frame metrics (both macro conventions) and segment metrics for videos -> {"metrics", "per_video"}."""
    videos = list(gts)
    p = [np.asarray(preds[v]) for v in videos]
    g = [np.asarray(gts[v]) for v in videos]
    frames = frame_metrics(p, g, num_classes, videos)
    segments = segment_metrics(p, g, bg_ids, overlaps, videos)
    per_video = {v: {**frames["per_video"][v], **segments["per_video"][v]} for v in videos}
    return {"metrics": {**frames["metrics"], **segments["metrics"]}, "per_video": per_video}


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


def _context(store: FeatureStore) -> tuple[dict[str, Any], list[str], int, list[int]]:
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


def with_relaxed(results: dict[str, Any], block: dict[str, Any]) -> dict[str, Any]:
    """`results` with the ``relaxed`` block placed right after the strict ``metrics``, else unchanged."""
    out: dict[str, Any] = {}
    for key, value in results.items():
        out[key] = value
        if key == "metrics":
            out["relaxed"] = block
    return out


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
    manifest, class_names, n_classes, bg = _context(store)
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
    manifest, class_names, n_classes, _ = _context(store)
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
    class_names = _context(store)[1]
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
    manifest, class_names, n_classes, bg = _context(store)
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
    manifest, class_names, n_classes, bg = _context(store)
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


# ------------------------------------------------------------------------------------------ results JSON
def build_results(
    task: str,
    manifest: dict[str, Any],
    features: str | Path | None,
    protocol: dict[str, Any],
    splits: dict[str, Any],
    class_names: Sequence[str],
    scored: dict[str, Any],
    predictions: dict[str, np.ndarray],
) -> dict[str, Any]:
    """Assemble a ``plstitch.results/v1`` dict (see docs/results-json.md)."""
    model = manifest.get("model") or {}
    return {
        "schema": SCHEMA,
        "task": task,
        "dataset": manifest.get("dataset"),
        "features": str(features) if features is not None else None,
        "model": {"spec": model.get("spec"), "provenance": model.get("provenance", {})},
        "protocol": protocol,
        "splits": splits,
        "class_names": list(class_names),
        "headline_metrics": list(default_metrics(manifest.get("dataset"))),
        "metrics": {k: float(v) for k, v in scored["metrics"].items()},
        "per_video": scored["per_video"],
        "predictions": {v: np.asarray(p).astype(int).tolist() for v, p in predictions.items()},
        "plstitch_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
    }


def write_results(path: str | Path, results: dict[str, Any]) -> None:
    """Write a results dict as JSON atomically, or to stdout when `path` is "-" (NaN becomes null)."""
    write_json_output(path, _nan_to_none(results))


def _nan_to_none(obj: Any) -> Any:
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nan_to_none(v) for v in obj]
    return obj


# ------------------------------------------------------------------------------- MS-TCN prediction files
MSTCN_HEADER = "### Frame level recognition: ###"


def read_label_file(path: str | Path) -> list[str]:
    """Frame labels of an MS-TCN file: header line then space-separated labels, or one label per line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise EvaluationError(f"{path}: cannot read labels ({exc}).") from exc
    lines = [ln.strip() for ln in lines]
    while lines and not lines[0]:
        lines.pop(0)
    if lines and lines[0].startswith("###"):
        return [tok for ln in lines[1:] for tok in ln.split()]
    return [ln for ln in lines if ln]


def video_key(path: Path) -> str:
    """Video name of a label file: the file name without its extension (MS-TCN writes none)."""
    name = path.name
    stem, dot, ext = name.rpartition(".")
    return stem if dot and stem and ext.isalnum() and len(ext) <= 5 and not ext.isdigit() else name


def read_mapping(path: str | Path) -> list[str]:
    """Class names in id order from an MS-TCN ``mapping.txt`` (``<id> <name>`` per line)."""
    path = Path(path)
    names: dict[int, str] = {}
    for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 2 or not parts[0].lstrip("-").isdigit():
            raise EvaluationError(f"{path} line {line_no}: expected '<id> <name>', got {line!r}.")
        names[int(parts[0])] = parts[1]
    if sorted(names) != list(range(len(names))):
        raise EvaluationError(f"{path}: class ids must be 0..N-1 without gaps, got {sorted(names)}.")
    return [names[i] for i in range(len(names))]


def _label_files(folder: str | Path, what: str) -> dict[str, Path]:
    folder = Path(folder)
    if not folder.is_dir():
        raise EvaluationError(f"{what} folder {folder} does not exist.")
    files = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")):
        files.setdefault(video_key(path), path)
    return files


def score_files(
    pred_dir: str | Path,
    gt_dir: str | Path,
    bg_classes: Sequence[str] = ("background",),
    mapping: str | Path | None = None,
    dataset: str | None = None,
    overlaps: Sequence[float] = DEFAULT_OVERLAPS,
    relaxed: bool = False,
    fps: float | None = None,
) -> dict[str, Any]:
    """Score MS-TCN-format prediction files against ground-truth files matched by video name.

    `relaxed` adds the challenge relaxed metrics; they need `dataset` (cholec80, m2cai16) and the files'
    frame rate `fps`.
    """
    preds_files, gt_files = _label_files(pred_dir, "Prediction"), _label_files(gt_dir, "Ground-truth")
    videos = sorted(preds_files)
    missing = [v for v in videos if v not in gt_files]
    if missing:
        raise EvaluationError(
            f"No ground truth in {gt_dir} for predicted videos {missing[:5]}; "
            "names must match (any extension)."
        )
    if not videos:
        raise EvaluationError(f"No prediction files in {pred_dir}.")
    pred_names = {v: read_label_file(preds_files[v]) for v in videos}
    gt_names = {v: read_label_file(gt_files[v]) for v in videos}
    class_names = (
        read_mapping(mapping)
        if mapping
        else sorted({x for d in (pred_names, gt_names) for seq in d.values() for x in seq})
    )
    spec = None
    if relaxed:
        spec = relaxed_spec(
            dataset,
            class_names,
            fps,
            fps_fix="pass --fps, the frame rate of the label files (e.g. 1 for 1-fps files)",
            dataset_fix="name it with --dataset, or drop --relaxed",
        )
    index = {name: i for i, name in enumerate(class_names)}
    preds, gts = {}, {}
    for v in videos:
        if not gt_names[v]:
            raise EvaluationError(f"Video {v!r}: ground-truth file {gt_files[v]} is empty.")
        if len(pred_names[v]) != len(gt_names[v]):
            raise EvaluationError(
                f"Video {v!r}: {len(pred_names[v])} predicted labels in {preds_files[v]} but "
                f"{len(gt_names[v])} in {gt_files[v]}; one prediction per ground-truth frame."
            )
        for what, seq, path in (
            ("predicted", pred_names[v], preds_files[v]),
            ("ground-truth", gt_names[v], gt_files[v]),
        ):
            unknown = sorted(set(seq) - set(index))
            if unknown:
                raise EvaluationError(
                    f"Video {v!r}: {what} labels {unknown[:5]} in {path} are not in {mapping}."
                )
        preds[v] = np.array([index[x] for x in pred_names[v]], dtype=np.int64)
        gts[v] = np.array([index[x] for x in gt_names[v]], dtype=np.int64)
    bg_ids = [index[b] for b in bg_classes if b in index]
    scored = score_videos(preds, gts, len(class_names), bg_ids, overlaps)
    manifest = {"dataset": dataset, "model": {"spec": None, "provenance": {}}}
    protocol = {
        "name": "score",
        "pred_dir": str(pred_dir),
        "gt_dir": str(gt_dir),
        "background": list(bg_classes),
        "mapping": str(mapping) if mapping else None,
        "overlaps": list(overlaps),
    }
    results = build_results("score", manifest, None, protocol, {"test": videos}, class_names, scored, preds)
    if dataset is None:
        results["headline_metrics"] = list(COOKING_METRICS)
    return results if spec is None else with_relaxed(results, relaxed_metrics(preds, gts, spec))
