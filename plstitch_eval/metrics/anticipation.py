"""Anticipation of tools and phases: regression targets and the MAE family of Rivoir et al. / Yuan et al.

Targets (Rivoir et al., MICCAI 2020): per frame and class, the minutes until the class next occurs, clipped at
the horizon ``h``; 0 while the class is present; ``h`` when it never occurs again in the video.

Scores (``Flaick/Surgical-Workflow-Anticipation``, ``test_scores.py``, Yuan et al., MICCAI 2021; REFERENCE.md
section 9): per class, over the frames given (y = prediction, t = target, minutes):

* ``outMAE`` on t == h; ``inMAE`` on 0 < t < h; ``wMAE`` = mean(outMAE, inMAE);
* ``pMAE`` on 0.1h < y < 0.9h (the frames the model *claims* to be anticipating);
* ``eMAE`` on 0 < t < 0.1h; ``mMAE`` on 0.1h < t < 0.9h; ``dMAE`` on 0.9h < t < h;

then the mean over classes. Stacking every test video's frames pools each class over the test set (Rivoir's
evaluation and the reference's comments; the reference's own loader passes one video at a time, see the doc).
An empty mask gives NaN for that class (the reference's ``np.mean`` of an empty array), a wMAE with either
half NaN is NaN, and the mean over classes is a plain ``np.mean``, so one NaN class makes the class mean NaN,
as in the reference. Here NaN is computed without RuntimeWarnings and written as ``None``. docs/metrics.md
("Anticipation and remaining surgery duration") gives the sources and edge cases.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plstitch_eval.errors import EvaluationError

METRICS = ("wMAE", "outMAE", "inMAE", "pMAE", "eMAE", "dMAE", "mMAE")


def phase_presence(labels: np.ndarray, num_classes: int) -> np.ndarray:
    """One-hot presence (frames x classes, bool) of per-frame class ids; -1 (unlabelled) is present nowhere.

    Why: phase anticipation uses the same targets as tool anticipation, from a presence matrix.
    """
    labels = np.asarray(labels)
    if labels.ndim != 1 or (labels.size and not np.issubdtype(labels.dtype, np.integer)):
        raise EvaluationError(
            f"Phase labels must be a 1-D array of integer class ids, got {labels.dtype} "
            f"with shape {labels.shape}."
        )
    if labels.size and (labels.min() < -1 or labels.max() >= num_classes):
        raise EvaluationError(
            f"Phase labels must lie in -1..{num_classes - 1} (-1 = unlabelled), "
            f"got {labels.min()}..{labels.max()}."
        )
    present = np.zeros((labels.size, num_classes), dtype=bool)
    labelled = labels >= 0
    present[np.flatnonzero(labelled), labels[labelled]] = True
    return present


def _check_horizon(horizon_min: float) -> float:
    horizon = float(horizon_min)
    if not np.isfinite(horizon) or horizon <= 0:
        raise EvaluationError(
            f"The anticipation horizon must be a positive number of minutes, got {horizon_min}."
        )
    return horizon


def anticipation_targets(present: np.ndarray, frame_times_s: np.ndarray, horizon_min: float) -> np.ndarray:
    """Minutes until each class next occurs (frames x classes, float32), clipped at the horizon.

    t[f, c] = min((time of the first frame g >= f with present[g, c]) - time[f]) / 60, h), h if there is none;
    from one video's own frame times, so gaps (missing frames) count as the time they span.
    """
    horizon = _check_horizon(horizon_min)
    present = np.asarray(present)
    frame_times = np.asarray(frame_times_s, dtype=np.float64)
    if present.ndim != 2 or present.dtype != bool:
        raise EvaluationError(
            f"Presence must be a boolean frames x classes matrix, got {present.dtype} "
            f"with shape {present.shape}."
        )
    if frame_times.shape != (present.shape[0],):
        raise EvaluationError(
            f"{present.shape[0]} frames of presence but frame times of shape {frame_times.shape}."
        )
    if not np.isfinite(frame_times).all() or (np.diff(frame_times) <= 0).any():
        raise EvaluationError("Frame times must be finite and strictly increasing (one video, in order).")
    present_times = np.where(present, frame_times[:, None], np.inf)
    next_time = np.minimum.accumulate(present_times[::-1], axis=0)[
        ::-1
    ]  # times increase: the first is the min
    minutes = np.minimum((next_time - frame_times[:, None]) / 60.0, horizon)  # inf - t = inf -> h
    return minutes.astype(np.float32)


def _as_matrix(values: np.ndarray, name: str) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise EvaluationError(f"{name} must be frames x classes, got shape {values.shape}.")
    if not np.isfinite(values).all():
        raise EvaluationError(f"{name} hold NaN or infinite values.")
    return values


def _masked_mae(errors: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Per-class mean of `errors` over the frames in `mask` (frames x classes); NaN where a mask is empty."""
    count = mask.sum(axis=0)
    total = np.where(mask, errors, 0.0).sum(axis=0)
    return np.divide(total, count, out=np.full(count.shape, np.nan), where=count > 0)


def _class_values(predictions: np.ndarray, targets: np.ndarray, horizon_min: float) -> dict[str, np.ndarray]:
    """Each metric per class (float64 arrays, NaN for an empty mask), the reference's masks."""
    horizon = _check_horizon(horizon_min)
    y, t = _as_matrix(predictions, "Predictions"), _as_matrix(targets, "Targets")
    if y.shape != t.shape:
        raise EvaluationError(f"Predictions {y.shape} and targets {t.shape} differ in shape.")
    if not np.issubdtype(t.dtype, np.floating):
        t = t.astype(np.float64)
    # Compared in the targets' dtype, so float32 targets clipped at float32(h) are exactly "outside".
    h = t.dtype.type(horizon)
    errors = np.abs(y.astype(np.float64) - t.astype(np.float64))
    out_mae = _masked_mae(errors, t == h)
    in_mae = _masked_mae(errors, (t > 0) & (t < h))
    halves = np.stack([out_mae, in_mae])
    w_mae = np.where(np.isnan(halves).any(axis=0), np.nan, np.nan_to_num(halves).mean(axis=0))
    low, high = t.dtype.type(horizon * 0.1), t.dtype.type(horizon * 0.9)  # as numpy casts a Python float
    return {
        "wMAE": w_mae,
        "outMAE": out_mae,
        "inMAE": in_mae,
        "pMAE": _masked_mae(errors, (y > low) & (y < high)),
        "eMAE": _masked_mae(errors, (t > 0) & (t < low)),
        "dMAE": _masked_mae(errors, (t > high) & (t < h)),
        "mMAE": _masked_mae(errors, (t > low) & (t < high)),
    }


def _json_float(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def _class_names(class_names: Sequence[str] | None, num_classes: int) -> list[str]:
    names = list(class_names) if class_names is not None else [str(c) for c in range(num_classes)]
    if len(names) != num_classes:
        raise EvaluationError(f"{len(names)} class names for {num_classes} classes.")
    return names


def _class_mean(values: np.ndarray) -> float:
    """The reference's ``np.mean`` over classes: NaN as soon as one class is NaN (no warning)."""
    return float("nan") if values.size == 0 or np.isnan(values).any() else float(values.mean())


def _defined_mean(values: np.ndarray) -> float:
    """The mean over the classes where a metric is defined (NaN when none is)."""
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if defined.size else float("nan")


def anticipation_scores(
    predictions: np.ndarray,
    targets: np.ndarray,
    horizon_min: float,
    class_names: Sequence[str] | None = None,
) -> dict:
    """The MAE family per class over the frames given (frames x classes, minutes), and the mean over classes.

    Pass the frames of every test video stacked to pool them per class, as the reference does. Returns
    ``{"horizon_min", "classes", "per_class": {metric: [per class]}, "mean": {metric: value}, "mean_defined":
    {metric: value}, "defined": {metric: classes}}``, None = NaN. ``mean`` is the reference's plain mean (NaN
    as soon as one class is); ``mean_defined`` the mean over the classes where the metric is defined (a phase
    present from frame 0 has no frame inside the horizon, so its inMAE never is), ``defined`` their count.
    """
    values = _class_values(predictions, targets, horizon_min)
    names = _class_names(class_names, values["wMAE"].size)
    return {
        "horizon_min": float(horizon_min),
        "classes": names,
        "per_class": {m: [_json_float(v) for v in values[m]] for m in METRICS},
        "mean": {m: _json_float(_class_mean(values[m])) for m in METRICS},
        "mean_defined": {m: _json_float(_defined_mean(values[m])) for m in METRICS},
        "defined": {m: int((~np.isnan(values[m])).sum()) for m in METRICS},
    }


def _nanmean_rows(values: np.ndarray) -> np.ndarray:
    """Column means over the non-NaN rows; NaN for an all-NaN column (no warning)."""
    defined = ~np.isnan(values)
    count = defined.sum(axis=0)
    return np.divide(
        np.where(defined, values, 0.0).sum(axis=0), count, out=np.full(count.shape, np.nan), where=count > 0
    )


def anticipation_scores_per_video(
    predictions_by_video: Sequence[np.ndarray],
    targets_by_video: Sequence[np.ndarray],
    horizon_min: float,
    class_names: Sequence[str] | None = None,
) -> dict:
    """The MAE family per video, and per class the mean over the videos where it is defined.

    Per class: NaN-mean over videos (a video whose mask for that class is empty is left out, as ivtmetrics
    does per video); then the plain mean over classes, as the pooled scores. Also each video's own scores.
    """
    if len(predictions_by_video) != len(targets_by_video):
        raise EvaluationError(
            f"{len(predictions_by_video)} prediction arrays for {len(targets_by_video)} videos."
        )
    if not predictions_by_video:
        raise EvaluationError("No videos to score.")
    per_video = [
        _class_values(y, t, horizon_min) for y, t in zip(predictions_by_video, targets_by_video, strict=True)
    ]
    sizes = {v["wMAE"].size for v in per_video}
    if len(sizes) != 1:
        raise EvaluationError(f"Videos have different numbers of classes: {sorted(sizes)}.")
    over_videos = {m: _nanmean_rows(np.stack([v[m] for v in per_video])) for m in METRICS}
    names = _class_names(class_names, sizes.pop())
    return {
        "horizon_min": float(horizon_min),
        "classes": names,
        "videos": len(per_video),
        "per_class": {m: [_json_float(v) for v in over_videos[m]] for m in METRICS},
        "mean": {m: _json_float(_class_mean(over_videos[m])) for m in METRICS},
        "mean_defined": {m: _json_float(_defined_mean(over_videos[m])) for m in METRICS},
        "per_video": [
            {
                "per_class": {m: [_json_float(x) for x in v[m]] for m in METRICS},
                "mean": {m: _json_float(_class_mean(v[m])) for m in METRICS},
                "mean_defined": {m: _json_float(_defined_mean(v[m])) for m in METRICS},
            }
            for v in per_video
        ],
    }
