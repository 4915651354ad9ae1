"""Frame metrics (accuracy, macro precision / recall / F1 / Jaccard) of phase recognition (numpy, vectorised).

Conventions (REFERENCE.md section 5; percent, 0-100). Frames whose ground truth is negative (-1 = unlabelled)
are ignored. Macro precision/recall/F1/Jaccard, two conventions:

* ``*_pooled``: one confusion matrix over all frames of all videos; macro average over the classes present
  in the ground truth *or* the prediction (scikit-learn's ``average="macro"`` with ``labels=None``);
* ``*_video``: the same per video (classes present in that video's ground truth or prediction), then the
  mean over videos (the SelfSupSurg recommendation). A class with no predicted frames has precision 0; a
  predicted class absent from the ground truth has recall 0 (scikit-learn's ``zero_division=0``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plstitch_eval.errors import EvaluationError
from plstitch_eval.metrics.labels import as_label_lists


def frame_accuracy(preds, gts) -> float:
    """Percentage of labelled frames (gt >= 0) predicted correctly, pooled over all videos."""
    p, g, _, _ = as_label_lists(preds, gts)
    p, g = np.concatenate(p) if p else np.zeros(0, int), np.concatenate(g) if g else np.zeros(0, int)
    keep = g >= 0
    if not keep.any():
        raise EvaluationError("No labelled frames to score (every ground-truth label is negative or empty).")
    return float((p[keep] == g[keep]).mean() * 100.0)


def _macro_from_confusion(conf: np.ndarray) -> dict[str, np.ndarray]:
    """Macro P/R/F1/Jaccard from confusion matrices [..., C, C] (rows = GT, cols = pred), in percent.

    Classes counted: those with GT support or predictions (sklearn macro, zero_division=0).
    """
    tp = np.diagonal(conf, axis1=-2, axis2=-1).astype(np.float64)
    support = conf.sum(-1).astype(np.float64)
    predicted = conf.sum(-2).astype(np.float64)
    present = (support > 0) | (predicted > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted > 0, tp / predicted, 0.0)
        recall = np.where(support > 0, tp / support, 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        union = support + predicted - tp
        jaccard = np.where(union > 0, tp / union, 0.0)
        n_present = present.sum(-1)

        def avg(x: np.ndarray) -> np.ndarray:
            return np.where(n_present > 0, (x * present).sum(-1) / np.maximum(n_present, 1), np.nan) * 100.0

    return {"precision": avg(precision), "recall": avg(recall), "f1": avg(f1), "jaccard": avg(jaccard)}


def confusion_matrices(preds, gts, num_classes: int | None = None) -> np.ndarray:
    """Per-video confusion matrices [V, C, C] (rows = GT, cols = prediction), frames with gt < 0 dropped."""
    p, g, names, _ = as_label_lists(preds, gts)
    lengths = np.array([len(x) for x in g], dtype=np.int64)
    flat_p = np.concatenate(p) if p else np.zeros(0, np.int64)
    flat_g = np.concatenate(g) if g else np.zeros(0, np.int64)
    video = np.repeat(np.arange(len(g)), lengths)
    keep = flat_g >= 0
    flat_p, flat_g, video = flat_p[keep], flat_g[keep], video[keep]
    if (flat_p < 0).any():
        raise EvaluationError("Predictions contain negative class ids; predict a class for every frame.")
    c = int(num_classes or 0)
    c = max(c, int(flat_g.max(initial=-1)) + 1, int(flat_p.max(initial=-1)) + 1, 1)
    flat = (video * c + flat_g) * c + flat_p
    return np.bincount(flat, minlength=len(g) * c * c).reshape(len(g), c, c)


def frame_metrics(preds, gts, num_classes: int | None = None, videos: Sequence[str] | None = None) -> dict:
    """Accuracy and macro P/R/F1/Jaccard in both conventions (``*_pooled`` and ``*_video``), in percent.

    Returns ``{"metrics": {...}, "per_video": {video: {"accuracy", "macro_f1", ...}}}``.
    """
    p, g, names, _ = as_label_lists(preds, gts, videos)
    for name, gt in zip(names, g, strict=True):
        if not (gt >= 0).any():
            raise EvaluationError(
                f"Video {name!r} has no labelled frames (empty ground truth); drop it from the split."
            )
    conf = confusion_matrices(p, g, num_classes)
    pooled = _macro_from_confusion(conf.sum(0))
    per = _macro_from_confusion(conf)
    correct = np.diagonal(conf, axis1=1, axis2=2).sum(1)
    total = conf.sum((1, 2))
    acc_video = correct / np.maximum(total, 1) * 100.0
    metrics = {"accuracy": float(correct.sum() / max(total.sum(), 1) * 100.0)}
    for key in ("precision", "recall", "f1", "jaccard"):
        metrics[f"macro_{key}_pooled"] = float(pooled[key])
        metrics[f"macro_{key}_video"] = float(np.mean(per[key]))
    metrics["accuracy_video"] = float(np.mean(acc_video))
    per_video = {
        name: {
            "accuracy": float(acc_video[i]),
            **{f"macro_{k}": float(per[k][i]) for k in ("precision", "recall", "f1", "jaccard")},
        }
        for i, name in enumerate(names)
    }
    return {"metrics": metrics, "per_video": per_video}


def macro_scores(preds, gts, num_classes: int | None = None) -> dict[str, float]:
    """Frame-pooled and per-video-averaged macro P/R/F1/Jaccard plus accuracy (see module docstring)."""
    return frame_metrics(preds, gts, num_classes)["metrics"]


def _macro(name: str, preds, gts, convention: str, num_classes: int | None) -> float:
    if convention not in ("pooled", "video"):
        raise EvaluationError(
            f"convention must be 'pooled' (all frames) or 'video' (per video), got {convention!r}."
        )
    return macro_scores(preds, gts, num_classes)[f"macro_{name}_{convention}"]


def macro_f1(preds, gts, convention: str = "pooled", num_classes: int | None = None) -> float:
    """Macro F1 in percent, over all frames (``pooled``) or per video then averaged (``video``)."""
    return _macro("f1", preds, gts, convention, num_classes)


def macro_precision(preds, gts, convention: str = "pooled", num_classes: int | None = None) -> float:
    """Macro precision in percent (``pooled`` or ``video`` convention)."""
    return _macro("precision", preds, gts, convention, num_classes)


def macro_recall(preds, gts, convention: str = "pooled", num_classes: int | None = None) -> float:
    """Macro recall in percent (``pooled`` or ``video`` convention)."""
    return _macro("recall", preds, gts, convention, num_classes)


def macro_jaccard(preds, gts, convention: str = "pooled", num_classes: int | None = None) -> float:
    """Macro Jaccard (IoU) in percent (``pooled`` or ``video`` convention)."""
    return _macro("jaccard", preds, gts, convention, num_classes)
