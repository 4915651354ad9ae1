"""Time probe: how linearly frozen features encode where a frame sits in its video.

A ridge regression (sklearn, intercept, features standardised with the train split's mean/std) predicts the
normalised time `(t - t_first) / (t_last - t_first)` in [0, 1] of each frame; fit on the train split,
scored on the test split with R^2 and the mean absolute error in units of video length. The penalty is
given, or (`alpha=None`) chosen from `ALPHAS` by cross-validation over the train videos (GroupKFold by video,
mean R^2): with a fixed small penalty high-dimensional features such as raw pixels overfit the train videos
and score below 0 on the test ones, which measures the probe, not the features.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.store.features import FeatureStore, VideoFeatures


def normalised_time(frame_times: np.ndarray) -> np.ndarray:
    """`(t - t[0]) / (t[-1] - t[0])` of one video's times: 0 = first frame, 1 = last (0 for one frame)."""
    t = np.asarray(frame_times, dtype=np.float64)
    span = t[-1] - t[0] if len(t) else 0.0
    return (t - t[0]) / span if span > 0 else np.zeros_like(t)


ALPHAS = tuple(10.0**k for k in range(-2, 6))  # ridge penalties tried when alpha is None
CV_FOLDS = 4  # GroupKFold folds over the train videos (fewer when there are fewer videos)


def stack_split(videos: list) -> tuple[np.ndarray, np.ndarray]:
    """Features [N, D] and normalised times [N] of a list of `VideoFeatures`, concatenated."""
    if not videos:
        raise EvaluationError("The time probe needs at least one video in each split.")
    x = np.concatenate([np.asarray(v.features, dtype=np.float64) for v in videos])
    y = np.concatenate([normalised_time(v.frame_times) for v in videos])
    return x, y


def choose_alpha(
    x: np.ndarray, y: np.ndarray, groups: np.ndarray, alphas: tuple[float, ...] = ALPHAS
) -> tuple[float, dict[float, float]]:
    """The penalty with the best mean held-out-video R^2 (GroupKFold over train videos), and every score.

    Ties go to the larger penalty (the simpler probe). Each fold standardises with its own train part.
    """
    # lazy: scikit-learn costs seconds to import and reproduce imports this module at its top
    from sklearn.model_selection import GroupKFold

    n_groups = len(np.unique(groups))
    if n_groups < 2:
        raise EvaluationError("Choosing the ridge penalty needs at least two train videos; pass --alpha.")
    folds = list(GroupKFold(n_splits=min(CV_FOLDS, n_groups)).split(x, y, groups))
    scores = {
        alpha: float(np.mean([fit_time_probe(x[tr], y[tr], x[te], y[te], alpha)["r2"] for tr, te in folds]))
        for alpha in alphas
    }
    best = max(scores.values())
    return max(a for a, r2 in scores.items() if r2 == best), scores


def fit_time_probe(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, alpha: float = 1.0
) -> dict[str, float]:
    """Ridge fit on train, R^2 and MAE on test; features standardised with train statistics (std 0 -> 1)."""
    # lazy, as above
    from sklearn.linear_model import Ridge
    from sklearn.metrics import mean_absolute_error, r2_score

    if alpha < 0:
        raise ConfigError(f"alpha must be >= 0, got {alpha}.")
    mean = x_train.mean(axis=0)
    std = x_train.std(axis=0)
    std[std == 0] = 1.0
    model = Ridge(alpha=alpha).fit((x_train - mean) / std, y_train)
    pred = model.predict((x_test - mean) / std)
    return {"r2": float(r2_score(y_test, pred)), "mae": float(mean_absolute_error(y_test, pred))}


def time_probe(
    store_dir: str | Path, train_split: str = "train", test_split: str = "test", alpha: float | None = None
) -> dict[str, Any]:
    """R^2 and MAE of normalised time regressed linearly from a feature store's frozen features.

    `alpha=None` chooses the ridge penalty by cross-validation over the train videos (`choose_alpha`).
    """
    store = FeatureStore(store_dir)
    splits = store.splits()
    for split in (train_split, test_split):
        if not splits.get(split):
            raise ConfigError(f"{store_dir}: split {split!r} is missing or empty (have {sorted(splits)}).")
    train_videos = store.read_split(train_split)
    x_train, y_train = stack_split(train_videos)
    x_test, y_test = stack_split(store.read_split(test_split))
    cv_scores = None
    if alpha is None:
        groups = np.repeat(np.arange(len(train_videos)), [len(v.features) for v in train_videos])
        alpha, cv_scores = choose_alpha(x_train, y_train, groups)
    scores = fit_time_probe(x_train, y_train, x_test, y_test, alpha)
    return {
        **scores,
        "alpha": alpha,
        "alpha_chosen_by": "given"
        if cv_scores is None
        else f"GroupKFold over {train_split} videos, mean R^2",
        "cv_r2": None if cv_scores is None else {f"{a:g}": r2 for a, r2 in cv_scores.items()},
        "target": "(t - t_first) / (t_last - t_first) per video",
        "n_train": len(y_train),
        "n_test": len(y_test),
    }


ORACLE_SPEC = "oracle:normalised-time"


def time_oracle_features(frame_times: np.ndarray) -> np.ndarray:
    """[T, 2] oracle features of one video: (cos, sin) of (pi / 2) * t/T.

    Why an angle: cosine similarity (the k-NN metric) of two such rows is cos of their time gap, so k-NN
    ranks neighbours by |t/T - t'/T|; a single positive t/T column would make every frame equally similar.
    """
    angle = 0.5 * np.pi * normalised_time(frame_times)
    return np.stack([np.cos(angle), np.sin(angle)], axis=1).astype(np.float32)


def write_time_oracle_store(source: str | Path, target: str | Path, overwrite: bool = False) -> Path:
    """A feature store with the oracle "where in the video" features in place of `source`'s features.

    Same videos, labels, frame times and splits as `source`; every protocol then scores what knowing the
    normalised time alone (no pixels) gives - an upper reference for order-only features.
    """
    src = FeatureStore(source)
    manifest = {
        **{k: v for k, v in src.manifest.items() if k != "format_version"},
        "model": {"spec": ORACLE_SPEC, "feature_dim": 2, "provenance": {"source_store": str(source)}},
        "preprocessing": {"features": "(cos, sin) of (pi/2) * normalised time"},
        "feature_dim": 2,
    }
    dst = FeatureStore.create(target, manifest, overwrite=overwrite)
    for item in src.read_many(src.videos()):
        if not dst.has(item.video) or dst.check(item.video) is not None:
            features = time_oracle_features(item.frame_times)
            dst.write(VideoFeatures(item.video, features, item.labels, item.frame_times))
    return Path(target)
