"""Remaining surgery duration (RSD): targets, MAE over whole videos and their last minutes, naive references.

RSDNet (Twinanda et al., IEEE TMI 2018) regresses the minutes left until the end of the surgery; its naive
reference predicts the mean training duration minus the elapsed time. The elapsed-time reference of
anticipation (the training set's mean target at the same elapsed time) lives here too, as it is the same
kind of baseline. docs/metrics.md ("Anticipation and remaining surgery duration") gives sources, edge cases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from plstitch_eval.errors import EvaluationError

LAST_MINUTES = (2.0, 5.0)  # RSD is also scored on each video's last 2 and 5 minutes (frames with target <= m)


def _frame_times(frame_times_s: np.ndarray) -> np.ndarray:
    frame_times = np.asarray(frame_times_s, dtype=np.float64)
    if frame_times.ndim != 1 or frame_times.size == 0:
        raise EvaluationError(f"Frame times must be a non-empty 1-D array, got shape {frame_times.shape}.")
    if not np.isfinite(frame_times).all() or (np.diff(frame_times) <= 0).any():
        raise EvaluationError("Frame times must be finite and strictly increasing (one video, in order).")
    return frame_times


def video_end_s(frame_times_s: np.ndarray) -> float:
    """The end of a video in seconds: its last frame's time plus its median frame step.

    Why: the last frame still covers one frame period (a 1-fps video of frames 0..N-1 s lasts N s, RSDNet's
    duration); the median step ignores gaps of missing frames.
    """
    frame_times = _frame_times(frame_times_s)
    if frame_times.size < 2:
        raise EvaluationError("A video of one frame has no frame step: give its end time (end_s) explicitly.")
    return float(frame_times[-1] + np.median(np.diff(frame_times)))


def remaining_targets(frame_times_s: np.ndarray, end_s: float | None = None) -> np.ndarray:
    """Minutes from each frame to the video's end (float64): (end_s - frame time) / 60.

    Why: RSDNet's regression target; ``end_s`` defaults to ``video_end_s`` (last frame + median step).
    """
    frame_times = _frame_times(frame_times_s)
    end = video_end_s(frame_times) if end_s is None else float(end_s)
    if not np.isfinite(end) or end < frame_times[-1]:
        raise EvaluationError(f"The video's end ({end} s) is before its last frame ({frame_times[-1]} s).")
    return (end - frame_times) / 60.0


def _mae(errors: np.ndarray) -> float | None:
    return float(errors.mean()) if errors.size else None


def _video_scores(errors: np.ndarray, targets: np.ndarray) -> dict[str, float | None]:
    scores = {"mae": _mae(errors)}
    for minutes in LAST_MINUTES:
        scores[f"mae_last_{minutes:g}min"] = _mae(errors[targets <= minutes])
    return scores


def rsd_scores(
    predictions_by_video: Mapping[str, np.ndarray], targets_by_video: Mapping[str, np.ndarray]
) -> dict:
    """MAE (minutes) of remaining-duration predictions over all frames and each video's last 2 and 5 minutes.

    ``pooled``: over the frames of all videos together; ``video_mean``: the mean of the per-video values
    (over the videos where it is defined); ``per_video``: each video's own. None where no frame qualifies.
    """
    if set(predictions_by_video) != set(targets_by_video):
        missing = sorted(set(predictions_by_video) ^ set(targets_by_video))
        raise EvaluationError(f"Predictions and targets name different videos: {missing[:5]}.")
    if not targets_by_video:
        raise EvaluationError("No videos to score.")
    per_video, all_errors, all_targets = {}, [], []
    for video in sorted(targets_by_video):
        y = np.asarray(predictions_by_video[video], dtype=np.float64)
        t = np.asarray(targets_by_video[video], dtype=np.float64)
        if y.shape != t.shape or t.ndim != 1:
            raise EvaluationError(
                f"Video {video}: predictions {y.shape} and targets {t.shape} must be one value per frame."
            )
        if not (np.isfinite(y).all() and np.isfinite(t).all()):
            raise EvaluationError(f"Video {video}: predictions or targets hold NaN or infinite values.")
        errors = np.abs(y - t)
        per_video[video] = _video_scores(errors, t)
        all_errors.append(errors)
        all_targets.append(t)
    pooled = _video_scores(np.concatenate(all_errors), np.concatenate(all_targets))
    video_mean = {}
    for key in pooled:
        defined = [v[key] for v in per_video.values() if v[key] is not None]
        video_mean[key] = float(np.mean(defined)) if defined else None
    return {"videos": len(per_video), "pooled": pooled, "video_mean": video_mean, "per_video": per_video}


def naive_rsd(mean_training_duration_min: float, elapsed_min: np.ndarray) -> np.ndarray:
    """RSDNet's naive reference: max(mean training duration - elapsed time, 0), in minutes."""
    return np.clip(float(mean_training_duration_min) - np.asarray(elapsed_min, dtype=np.float64), 0.0, None)


def _bins(elapsed_min: np.ndarray, bin_min: float) -> np.ndarray:
    """Half-open bins [k b, (k+1) b) of elapsed minutes (a 1e-9 nudge so 0.3 / 0.1 falls in bin 3)."""
    return np.floor(elapsed_min / bin_min + 1e-9).astype(np.int64)


def mean_target_at_elapsed(
    train_targets: Sequence[np.ndarray],
    train_elapsed_min: Sequence[np.ndarray],
    query_elapsed_min: np.ndarray,
    bin_min: float = 0.1,
) -> np.ndarray:
    """The training frames' mean target at the same elapsed time, for each queried elapsed time.

    Why: the reference row of anticipation (and a sharper RSD reference than ``naive_rsd``). Elapsed time is
    binned per ``bin_min`` minutes (default 0.1 min = 6 s); a bin without training frames takes the nearest
    earlier bin's mean (later than the longest training video: the last bin's), or the first bin's.
    """
    if len(train_targets) != len(train_elapsed_min) or not train_targets:
        raise EvaluationError(
            f"{len(train_targets)} target arrays for {len(train_elapsed_min)} elapsed arrays; "
            "need at least one training video."
        )
    if not (np.isfinite(bin_min) and bin_min > 0):
        raise EvaluationError(f"The elapsed-time bin must be a positive number of minutes, got {bin_min}.")
    targets = [np.asarray(t, dtype=np.float64) for t in train_targets]
    elapsed = [np.asarray(e, dtype=np.float64) for e in train_elapsed_min]
    for t, e in zip(targets, elapsed, strict=True):
        if e.ndim != 1 or t.shape[:1] != e.shape:
            raise EvaluationError(
                f"Targets of shape {t.shape} for {e.shape} elapsed times: one row per frame."
            )
    if len({t.shape[1:] for t in targets}) != 1:
        raise EvaluationError("Training targets have different numbers of classes.")
    all_targets, all_bins = np.concatenate(targets), _bins(np.concatenate(elapsed), bin_min)
    if all_bins.size == 0:
        raise EvaluationError("The training videos have no frames.")
    if all_bins.min() < 0 or not np.isfinite(all_targets).all():
        raise EvaluationError("Training elapsed times must be >= 0 and targets finite.")
    query_bins = _bins(np.asarray(query_elapsed_min, dtype=np.float64), bin_min)
    num_bins = max(int(all_bins.max()), int(query_bins.max(initial=0))) + 1
    flat = all_targets.reshape(all_targets.shape[0], -1)
    sums = np.zeros((num_bins, flat.shape[1]))
    np.add.at(sums, all_bins, flat)
    counts = np.bincount(all_bins, minlength=num_bins)
    filled = np.flatnonzero(counts)
    # For each bin, the last non-empty bin at or before it (before the first non-empty one: the first).
    source = filled[np.clip(np.searchsorted(filled, np.arange(num_bins), side="right") - 1, 0, None)]
    means = sums[source] / counts[source][:, None]
    return means[np.clip(query_bins, 0, None)].reshape(query_bins.shape + all_targets.shape[1:])
