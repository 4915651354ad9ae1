"""Surgical skill from video (JIGSAWS): Spearman's rho and MAE of per-video scores, LOSO / LOUO folds, and the
two reference predictions a representation has to beat.

The skill literature regresses the global rating score (GRS, the sum of six modified-OSATS items, 6-30) per
trial and reports Spearman's rho between predicted and true scores over the held-out trials (ties share their
mean rank; rho is the Pearson correlation of the ranks) and the mean absolute error. A constant prediction has
no rank order, so its rho is undefined: None, with a note saying why.

Folds follow JIGSAWS' Experimental_setup: leave one supertrial out (LOSO: fold k holds out every user's trial
k, five folds) and leave one user out (LOUO: fold u holds out all trials of user u, eight users B-I). Trial
names are the release's, ``<Task>_<user letter><three-digit trial>`` (``Suturing_B001``).

References: the training mean (the mean training score for every held-out trial) and a duration-only
regressor (least squares of the training scores on the trial's duration: skill correlates with time).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plstitch_eval.errors import EvaluationError

TRIAL_NAME = re.compile(r"^(?P<task>.+)_(?P<user>[A-Z])(?P<trial>\d{3})$")
CONSTANT_NOTE = "constant prediction: Spearman's rho is undefined (no rank order)"


def trial_parts(name: str) -> tuple[str, str, int]:
    """``Suturing_B001`` -> ("Suturing", "B", 1): task, user letter and supertrial of a JIGSAWS trial."""
    found = TRIAL_NAME.match(name)
    if not found:
        raise EvaluationError(
            f"{name!r} is not a JIGSAWS trial name; expected <Task>_<user letter><3-digit trial>, "
            "e.g. Suturing_B001"
        )
    return found["task"], found["user"], int(found["trial"])


def _folds(names: Sequence[str], key_of: int, label: str) -> list[dict[str, Any]]:
    """One fold per distinct key (user letter or trial number), in sorted key order: its trials test."""
    keys = {name: trial_parts(name)[key_of] for name in names}
    folds = []
    for key in sorted(set(keys.values())):
        test = [n for n in names if keys[n] == key]
        train = [n for n in names if keys[n] != key]
        folds.append({"name": f"{label}-{key}", "train": train, "val": [], "test": test})
    if len(folds) < 2:
        raise EvaluationError(
            f"{label.upper()} needs trials of at least two {label} groups, got {len(folds)}"
        )
    return folds


def loso_folds(names: Sequence[str]) -> list[dict[str, Any]]:
    """Leave one supertrial out: fold k (``loso-k``) tests every user's trial k and trains on the rest."""
    return _folds(list(names), 2, "loso")


def louo_folds(names: Sequence[str]) -> list[dict[str, Any]]:
    """Leave one user out: fold u (``louo-B`` ...) tests all of user u's trials and trains on the others."""
    return _folds(list(names), 1, "louo")


def average_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n of `values`, tied values sharing the mean of their ranks (scipy's ``rankdata``)."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=np.float64)
    ranks[order] = np.arange(1, len(values) + 1)
    _, group, counts = np.unique(values, return_inverse=True, return_counts=True)
    sums = np.bincount(group, weights=ranks)
    return (sums / counts)[group]


def spearman_rho(predicted: Sequence[float], target: Sequence[float]) -> float | None:
    """Spearman's rho: the Pearson correlation of the average ranks; None when either side is constant
    (or fewer than two videos), where it is undefined."""
    predicted, target = np.asarray(predicted, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if len(predicted) < 2 or np.ptp(predicted) == 0 or np.ptp(target) == 0:
        return None
    a, b = average_ranks(predicted), average_ranks(target)
    a, b = a - a.mean(), b - b.mean()
    return float((a * b).sum() / np.sqrt((a * a).sum() * (b * b).sum()))


def skill_scores(predicted: Mapping[str, float], target: Mapping[str, float]) -> dict[str, object]:
    """``{"spearman_rho", "mae", "n_videos"}`` of per-video predicted vs true scores (the videos of
    `predicted`); a constant prediction gets rho None and a ``note``."""
    missing = [v for v in predicted if v not in target]
    if missing or not predicted:
        raise EvaluationError(
            f"no true score for video(s) {', '.join(missing)}" if missing else "no videos to score"
        )
    videos = list(predicted)
    p = np.array([predicted[v] for v in videos], dtype=np.float64)
    y = np.array([target[v] for v in videos], dtype=np.float64)
    if not (np.isfinite(p).all() and np.isfinite(y).all()):
        raise EvaluationError("skill scores must be finite numbers (a NaN prediction or score?)")
    rho = spearman_rho(p, y)
    out: dict[str, object] = {
        "spearman_rho": rho,
        "mae": float(np.abs(p - y).mean()),
        "n_videos": len(videos),
    }
    if rho is None:
        out["note"] = (
            CONSTANT_NOTE if len(videos) > 1 and np.ptp(p) == 0 else "rho undefined for these videos"
        )
    return out


def fold_scores(folds: Sequence[Mapping[str, float]], target: Mapping[str, float]) -> dict[str, object]:
    """Scores of cross-validated predictions (one {video: predicted} per fold): each fold's, their mean
    (over the folds where rho is defined) and the pooled held-out videos' (each video is held out once)."""
    per_fold = [skill_scores(fold, target) for fold in folds]
    rhos = [f["spearman_rho"] for f in per_fold if f["spearman_rho"] is not None]
    pooled = {v: s for fold in folds for v, s in fold.items()}
    return {
        "folds": per_fold,
        "mean_spearman_rho": float(np.mean(rhos)) if rhos else None,
        "mean_mae": float(np.mean([f["mae"] for f in per_fold])),
        "pooled": skill_scores(pooled, target),
    }


def training_mean_prediction(train_scores: Sequence[float], test_videos: Sequence[str]) -> dict[str, float]:
    """Reference: the mean training score for every held-out video (its rho is undefined)."""
    if not len(train_scores):
        raise EvaluationError("the training-mean reference needs at least one training video")
    mean = float(np.mean(np.asarray(train_scores, dtype=np.float64)))
    return {v: mean for v in test_videos}


def duration_prediction(
    train_durations: Sequence[float], train_scores: Sequence[float], test_durations: Mapping[str, float]
) -> dict[str, float]:
    """Reference: least squares ``score = a + b * duration`` fitted on the training videos, applied to the
    held-out videos' durations (seconds)."""
    x = np.asarray(train_durations, dtype=np.float64)
    y = np.asarray(train_scores, dtype=np.float64)
    if len(x) != len(y) or len(x) < 2 or np.ptp(x) == 0:
        raise EvaluationError(
            "the duration reference needs at least two training videos of different durations, with one "
            f"score each (got {len(x)} durations, {len(y)} scores)"
        )
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())
    intercept = float(y.mean() - slope * x.mean())
    return {v: intercept + slope * float(d) for v, d in test_durations.items()}
