"""Critical view of safety (CVS, Endoscapes2023): AP, Brier score, F1 and balanced accuracy of C1, C2, C3.

As CAMMA's ``SurgLatentGraph/evaluator/CVSMetric.py`` (torchmetrics, multilabel, ``average='none'``) computes
them, on the annotated frames only:

* the target of each criterion is the raters' mean (three raters: 0, 1/3, 2/3 or 1); AP, F1 and balanced
  accuracy read it **rounded** (``round``, half to even, as ``torch.round``), the Brier score reads it as is;
* AP per criterion: no interpolation, tied scores one threshold (scikit-learn's ``average_precision_score``);
  a criterion without a positive frame has no AP (NaN, left out of the mean: the torchmetrics of the
  reference, before 1.4); ``absent="zero"`` scores it 0, as torchmetrics >= 1.4 does. mAP = the mean of the
  criteria's APs (``torch.nanmean``);
* Brier score per criterion: the mean squared error of the probabilities against the unrounded mean;
  the headline is their mean;
* F1 per criterion at threshold 0.5 (a frame is positive when its probability is **above** 0.5, as
  torchmetrics thresholds), 0 when a criterion has neither a predicted nor a true positive;
* balanced accuracy (not in the reference; SurgBenchKit and the SSL benchmarks report it): per criterion the
  mean recall over the classes present in the rounded target, at the same threshold (scikit-learn's
  ``balanced_accuracy_score``), then the mean over criteria.

Per video: each video scored as above, then each criterion's mean over the videos where it is defined, then
the mean over criteria (``agg='per_class_per_video'`` of the reference); ``average="per_video"`` takes each
video's mean over criteria first, then the mean over videos (its ``agg='per_video'``).

Inputs are probabilities (``sigmoid`` of the logits, as the reference applies). AP, F1 and balanced accuracy
in percent, the Brier score as a fraction (0 best, 1 worst).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.triplets import ABSENT, defined_means, video_aps

CRITERIA = ("C1", "C2", "C3")
THRESHOLD = 0.5  # a criterion is predicted met when its probability is above this
VIDEO_AVERAGES = ("per_class", "per_video")  # criterion-wise mean over videos first, or video-wise first
METRICS = ("mAP", "brier", "f1", "balanced_accuracy")


def annotated(probs: np.ndarray, raters_mean: np.ndarray, video: str = "#0") -> tuple[np.ndarray, np.ndarray]:
    """The annotated rows of one video's [F, 3] probabilities and raters' means (a NaN target row is a frame
    without CVS annotation, dropped), checked: probabilities and targets in [0, 1]."""
    probs, target = np.asarray(probs, dtype=np.float64), np.asarray(raters_mean, dtype=np.float64)
    if probs.shape != target.shape or probs.ndim != 2 or probs.shape[1] != len(CRITERIA):
        raise EvaluationError(
            f"Video {video!r}: probabilities {probs.shape} and raters' means {target.shape} must both be "
            f"[frames, {len(CRITERIA)}] (C1, C2, C3)"
        )
    keep = ~np.isnan(target).any(axis=1)
    probs, target = probs[keep], target[keep]
    if not np.isfinite(probs).all() or (probs < 0).any() or (probs > 1).any():
        raise EvaluationError(
            f"Video {video!r}: CVS scores must be probabilities in [0, 1]; pass sigmoid(logits)"
        )
    if (target < 0).any() or (target > 1).any():
        raise EvaluationError(f"Video {video!r}: raters' means must lie in [0, 1] (the mean of 0/1 votes)")
    return probs, target


def criterion_scores(
    probs: np.ndarray, raters_mean: np.ndarray, absent: str = "ignore"
) -> dict[str, np.ndarray]:
    """Per-criterion AP (percent), Brier score, F1 (percent) and balanced accuracy (percent) of annotated
    [F, 3] probabilities against the raters' means; each value an array of 3 (NaN where undefined)."""
    if absent not in ABSENT:
        raise EvaluationError(f"absent must be one of {', '.join(ABSENT)}, got {absent!r}")
    n = len(CRITERIA)
    if not len(probs):
        return {"ap": np.full(n, np.nan), "brier": np.full(n, np.nan), "f1": np.full(n, np.nan),
                "balanced_accuracy": np.full(n, np.nan)}  # fmt: skip
    rounded = np.round(raters_mean)
    predicted = probs > THRESHOLD
    positive = rounded == 1
    tp = (predicted & positive).sum(axis=0)
    fp = (predicted & ~positive).sum(axis=0)
    fn = (~predicted & positive).sum(axis=0)
    tn = (~predicted & ~positive).sum(axis=0)
    denominator = 2 * tp + fp + fn
    f1 = np.where(denominator > 0, 2 * tp / np.maximum(denominator, 1), 0.0) * 100.0
    with np.errstate(invalid="ignore", divide="ignore"):
        recalls = np.stack([tp / (tp + fn), tn / (tn + fp)])  # NaN for a class absent from the target
    balanced = np.nanmean(recalls, axis=0) * 100.0
    return {
        "ap": video_aps(probs, rounded, absent),
        "brier": ((probs - raters_mean) ** 2).mean(axis=0),
        "f1": f1,
        "balanced_accuracy": balanced,
    }


def _named(per_criterion: dict[str, np.ndarray]) -> dict[str, float | None]:
    """Headline means and per-criterion values, JSON-ready (None where undefined)."""
    out: dict[str, float | None] = {}
    for key, values in per_criterion.items():
        head = "mAP" if key == "ap" else key
        out[head] = _mean(values)
        for name, value in zip(CRITERIA, values, strict=True):
            out[f"{'AP' if key == 'ap' else key}_{name}"] = None if np.isnan(value) else float(value)
    return out


def _mean(values: np.ndarray) -> float | None:
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if defined.size else None


def cvs_scores(probs: np.ndarray, raters_mean: np.ndarray, absent: str = "ignore") -> dict[str, float | None]:
    """Per-frame CVS scores of frames pooled over videos: ``mAP``, ``brier``, ``f1``, ``balanced_accuracy``
    (means over C1-C3) and each criterion's (``AP_C1``, ``brier_C1``, ...); NaN-target rows are dropped."""
    probs, target = annotated(probs, raters_mean)
    return _named(criterion_scores(probs, target, absent))


def cvs_scores_per_video(
    probs: Sequence[np.ndarray],
    raters_mean: Sequence[np.ndarray],
    videos: Sequence[str] | None = None,
    average: str = "per_class",
    absent: str = "ignore",
) -> dict[str, float | None]:
    """Video-wise CVS scores (keys as `cvs_scores`): each video scored alone, then averaged over videos
    (``average``: each criterion over videos then over criteria, or each video over criteria then over
    videos)."""
    if average not in VIDEO_AVERAGES:
        raise EvaluationError(f"average must be one of {', '.join(VIDEO_AVERAGES)}, got {average!r}")
    names = list(videos) if videos is not None else [f"#{i}" for i in range(len(raters_mean))]
    if not (len(probs) == len(raters_mean) == len(names)) or not names:
        raise EvaluationError(
            f"{len(probs)} probability arrays, {len(raters_mean)} target arrays and {len(names)} video "
            "names; pass one of each per video (at least one video)."
        )
    rows = [
        criterion_scores(*annotated(p, y, name), absent)
        for name, p, y in zip(names, probs, raters_mean, strict=True)
    ]
    per_criterion = {key: defined_means(np.stack([row[key] for row in rows])) for key in rows[0]}
    out = _named(per_criterion)
    if average == "per_video":
        for key in rows[0]:
            video_means = defined_means(np.stack([row[key] for row in rows]).T)  # each video over criteria
            out["mAP" if key == "ap" else key] = _mean(video_means)
    return out


def cvs_metrics(
    probs: Sequence[np.ndarray],
    raters_mean: Sequence[np.ndarray],
    videos: Sequence[str] | None = None,
    absent: str = "ignore",
) -> dict[str, dict[str, float | None]]:
    """``{"per_frame": cvs_scores of all videos' frames pooled, "per_video": cvs_scores_per_video}``."""
    per_video = cvs_scores_per_video(probs, raters_mean, videos, absent=absent)  # checks every video
    pooled = cvs_scores(
        np.concatenate([np.asarray(p, dtype=np.float64) for p in probs]),
        np.concatenate([np.asarray(y, dtype=np.float64) for y in raters_mean]),
        absent,
    )
    return {"per_frame": pooled, "per_video": per_video}
