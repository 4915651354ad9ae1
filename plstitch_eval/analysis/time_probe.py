"""Time probe: how linearly frozen features encode where a frame sits in its video.

A ridge regression (sklearn, intercept, features standardised with the train split's mean/std) predicts the
normalised time `(t - t_first) / (t_last - t_first)` in [0, 1] of each frame; fit on the train split,
scored on the test split with R^2 and the mean absolute error in units of video length.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError, EvaluationError


def normalised_time(frame_times: np.ndarray) -> np.ndarray:
    """`(t - t[0]) / (t[-1] - t[0])` of one video's times: 0 = first frame, 1 = last (0 for one frame)."""
    t = np.asarray(frame_times, dtype=np.float64)
    span = t[-1] - t[0] if len(t) else 0.0
    return (t - t[0]) / span if span > 0 else np.zeros_like(t)


def stack_split(videos: list) -> tuple[np.ndarray, np.ndarray]:
    """Features [N, D] and normalised times [N] of a list of `VideoFeatures`, concatenated."""
    if not videos:
        raise EvaluationError("The time probe needs at least one video in each split.")
    x = np.concatenate([np.asarray(v.features, dtype=np.float64) for v in videos])
    y = np.concatenate([normalised_time(v.frame_times) for v in videos])
    return x, y


def fit_time_probe(
    x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, y_test: np.ndarray, alpha: float = 1.0
) -> dict[str, float]:
    """Ridge fit on train, R^2 and MAE on test; features standardised with train statistics (std 0 -> 1)."""
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
    store_dir: str | Path, train_split: str = "train", test_split: str = "test", alpha: float = 1.0
) -> dict[str, Any]:
    """R^2 and MAE of normalised time regressed linearly from a feature store's frozen features."""
    from plstitch_eval.features import FeatureStore

    store = FeatureStore(store_dir)
    splits = store.splits()
    for split in (train_split, test_split):
        if not splits.get(split):
            raise ConfigError(f"{store_dir}: split {split!r} is missing or empty (have {sorted(splits)}).")
    x_train, y_train = stack_split(store.read_split(train_split))
    x_test, y_test = stack_split(store.read_split(test_split))
    scores = fit_time_probe(x_train, y_train, x_test, y_test, alpha)
    return {
        **scores,
        "alpha": alpha,
        "target": "(t - t_first) / (t_last - t_first) per video",
        "n_train": len(y_train),
        "n_test": len(y_test),
    }
