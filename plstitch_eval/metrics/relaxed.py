"""Relaxed-boundary phase metrics of the Cholec80 / M2CAI16 challenge evaluation, its known bugs fixed.

The original is the MATLAB script of the M2CAI16 workflow challenge (``Evaluate.m`` + ``Main.m`` +
``ReadPhaseLabel.m``) and its Cholec80 variant, copied into SV-RCNet, TMRNet, Trans-SVNet, LoViT, Surgformer
and others (e.g. ``YuemingJin/TMRNet:code/eval/result/matlab-eval/Evaluate.m``). Per video, for every
ground-truth phase *segment* (maximal run of one phase), a wrong prediction in the segment's first 10 s is
forgiven when it is a phase that may come *before* the segment's phase ("late transition" of the model), and
in its last 10 s when it is a phase that may come *after* it ("early transition"); the window shrinks to the
segment length for short segments. Which phases are forgiven is the script's table of label-id offsets,
written out by name in ``TRANSITIONS`` (Cholec80: -1 at the start and +1 at the end of every phase, plus -2
at the start of CleaningCoagulation and GallbladderRetraction and +2 at the end of GallbladderDissection
onwards; M2CAI16: the same with TrocarPlacement first). Then accuracy and per-phase precision, recall and
Jaccard are computed per video.

What this module changes (docs/metrics.md gives each source; Funke et al. 2023, arXiv 2305.13961, discuss
the script and its bug):

1. End-window index bug. ``curDiff(curDiff(end-t+1:end)==1) = 0`` tests the last ``t`` frames, but the
   logical mask of length ``t`` zeroes frames among the *first* ``t``: early transitions are never forgiven
   and unrelated frames at the segment start are. Here both windows are tested and forgiven on the same
   frames.
2. Double-counted true positives. The script's TP of phase k counts every frame of ``gt == k or pred == k``
   whose error was forgiven, so one forgiven frame is a TP of its ground-truth phase *and* of its predicted
   phase; precision and recall can pass 100 and ``Main.m`` clips them. Here a forgiven frame counts once, as
   a correct prediction of its ground-truth phase (its prediction is replaced by the ground truth before
   counting), so no value can pass 100 and nothing is clipped.
3. Phase in the ground truth but never predicted: the script's precision is 0/0 = NaN, which ``nanmean``
   drops (never predicting a phase costs no precision; one copy sets 0 instead), or tp/0 = Inf, clipped to
   100, when some of its frames were forgiven. Here it is 0.
4. Phase absent from a video's ground truth: the script gives NaN for all three even when the phase is
   predicted, so false alarms on it are never penalised. Here such a phase has precision 0 and Jaccard 0
   (all its frames are false positives) and no recall (nothing to recall); a phase neither present nor
   predicted is left out. Recall is defined on ground-truth phases only.
5. Averaging. The script averages each phase over videos, then over phases (``mean`` for Jaccard and
   recall, ``nanmean`` for precision) and reports the std over *phases*, while accuracy is averaged over
   videos with its std over videos. Here every metric is first a macro average over the phases defined in
   one video, then a mean and a sample std (``ddof=1``, as MATLAB's ``std``) over videos. The script's
   phase-first order, with fixes 1-4, is kept as ``phase_mean`` (and ``per_phase``) for comparison with
   published tables.
6. Window in seconds. The script takes ``fps`` as an argument and uses ``10 * fps`` frames, so a copy run
   with the wrong value (25 on 1-fps labels) silently widens the window 25x. Here ``fps`` is the labels'
   recorded rate (store manifest, or ``--fps`` for ``score``) and the window is ``ceil(10 s * fps)``
   frames: the frames less than 10 s from the segment boundary (10 frames at 1 fps, as in the script).

Frames labelled -1 (unlabelled) are ignored, as by every strict metric; they split segments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES as _CHOLEC80
from plstitch_eval.data.datasets.m2cai16 import M2CAI16_PHASES as _M2CAI16
from plstitch_eval.errors import ConfigError, EvaluationError

TOLERANCE_S = 10.0
DEFINITION = "plstitch-relaxed/v1"  # the challenge rules with fixes 1-6 of this module's docstring

# phase names as the adapters define them (one home); the tables below are keyed by name
CHOLEC80_PHASES = tuple(_CHOLEC80)
M2CAI16_PHASES = tuple(_M2CAI16)
# phases whose segment start also forgives two ids back / whose end two ids ahead (Evaluate.m)
_WIDE_BEFORE = frozenset({"CleaningCoagulation", "GallbladderRetraction"})
_WIDE_AFTER = frozenset(
    {"GallbladderDissection", "GallbladderPackaging", "CleaningCoagulation", "GallbladderRetraction"}
)


@dataclass(frozen=True)
class TransitionTable:
    """Phases forgiven near boundaries: `before[g]` in a segment's first window, `after[g]` in its last."""

    dataset: str
    phases: tuple[str, ...]
    before: Mapping[str, frozenset[str]]
    after: Mapping[str, frozenset[str]]


def _offset_table(dataset: str, phases: Sequence[str]) -> TransitionTable:
    """The script's id-offset rules (-1 / +1, and -2 / +2 for the wide phases) turned into phase names."""
    before, after = {}, {}
    for i, phase in enumerate(phases):
        back = (1, 2) if phase in _WIDE_BEFORE else (1,)
        ahead = (1, 2) if phase in _WIDE_AFTER else (1,)
        before[phase] = frozenset(phases[i - d] for d in back if i - d >= 0)
        after[phase] = frozenset(phases[i + d] for d in ahead if i + d < len(phases))
    return TransitionTable(dataset, tuple(phases), before, after)


TRANSITIONS: dict[str, TransitionTable] = {
    "cholec80": _offset_table("cholec80", CHOLEC80_PHASES),
    "m2cai16": _offset_table("m2cai16", M2CAI16_PHASES),
}


@dataclass(frozen=True)
class RelaxedSpec:
    """What the relaxed metrics need: class order, window in frames and the forgiven (gt, pred) pairs."""

    dataset: str
    class_names: tuple[str, ...]
    fps: float
    tolerance_s: float
    window: int
    before: np.ndarray  # bool [C, C]: before[g, p] = p forgiven in the first window of a segment of g
    after: np.ndarray  # bool [C, C]: after[g, p] = p forgiven in the last window of a segment of g


def window_frames(fps: float, tolerance_s: float = TOLERANCE_S) -> int:
    """Frames less than `tolerance_s` from a boundary at `fps`: ceil(tolerance_s * fps) (10 at 1 fps)."""
    return int(math.ceil(tolerance_s * fps - 1e-9))


def relaxed_spec(
    dataset: str | None,
    class_names: Sequence[str],
    fps: float | None,
    tolerance_s: float = TOLERANCE_S,
    fps_fix: str = "pass the frame rate of the labels",
    dataset_fix: str = "drop --relaxed or evaluate one of those datasets",
) -> RelaxedSpec:
    """Check dataset, frame rate and class names before any model runs; map the table to class ids."""
    key = (dataset or "").lower()
    if key not in TRANSITIONS:
        raise ConfigError(
            f"Relaxed metrics need the challenge transition table of the dataset, and {dataset!r} has none "
            f"(supported: {', '.join(TRANSITIONS)}); {dataset_fix}."
        )
    try:
        rate = float(fps) if fps is not None and not isinstance(fps, bool | str) else math.nan
    except (TypeError, ValueError):
        rate = math.nan
    if not math.isfinite(rate):
        raise ConfigError(
            f"Relaxed metrics need the labels' frame rate to turn {tolerance_s:g} s into frames, "
            f"got {fps!r}; {fps_fix}."
        )
    if rate <= 0:
        raise ConfigError(f"The labels' frame rate must be > 0 for relaxed metrics, got {fps}; {fps_fix}.")
    if not (math.isfinite(tolerance_s) and tolerance_s >= 0):
        raise ConfigError(f"Relaxed tolerance must be a finite number of seconds >= 0, got {tolerance_s}.")
    table = TRANSITIONS[key]
    names = [str(n) for n in class_names]
    unknown = [n for n in names if n not in table.phases]
    if unknown or not names:
        raise ConfigError(
            f"Class names {unknown[:5] or names} are not {key} phases ({', '.join(table.phases)}); relaxed "
            "metrics match the transition table by phase name: use the dataset's phase names (score: "
            "--mapping with '<id> <name>' lines)."
        )
    index = {name: i for i, name in enumerate(names)}
    before = np.zeros((len(names), len(names)), dtype=bool)
    after = np.zeros_like(before)
    for g, name in enumerate(names):
        before[g, [index[p] for p in table.before[name] if p in index]] = True
        after[g, [index[p] for p in table.after[name] if p in index]] = True
    window = window_frames(rate, tolerance_s)
    return RelaxedSpec(key, tuple(names), rate, float(tolerance_s), window, before, after)


def relax_predictions(pred: np.ndarray, gt: np.ndarray, spec: RelaxedSpec) -> np.ndarray:
    """Predictions with every forgiven frame set to its ground truth (fixed rules 1 and 6), one video."""
    pred, gt = np.asarray(pred, dtype=np.int64), np.asarray(gt, dtype=np.int64)
    n = len(gt)
    if n == 0:
        return pred.copy()
    change = np.ones(n, dtype=bool)
    change[1:] = gt[1:] != gt[:-1]
    starts = np.flatnonzero(change)
    ends = np.append(starts[1:], n)
    run = np.cumsum(change) - 1
    frame = np.arange(n)
    from_start = frame - starts[run]  # 0 for a segment's first frame
    from_end = ends[run] - 1 - frame  # 0 for its last frame
    c = len(spec.class_names)
    valid = (gt >= 0) & (gt < c) & (pred >= 0) & (pred < c)  # others are never forgiven
    g, p = np.where(valid, gt, 0), np.where(valid, pred, 0)
    forgive = (valid & (pred != gt)) & (
        ((from_start < spec.window) & spec.before[g, p]) | ((from_end < spec.window) & spec.after[g, p])
    )
    return np.where(forgive, gt, pred)


def _check_video(video: str, pred: np.ndarray, gt: np.ndarray, n_classes: int) -> None:
    """Refuse predictions that cannot be scored against `gt`, naming the video and the fix."""
    if pred.ndim != 1 or gt.ndim != 1 or len(pred) != len(gt):
        raise EvaluationError(
            f"Video {video!r}: {pred.size} predicted labels but {gt.size} ground-truth labels; "
            "predictions must have one label per ground-truth frame."
        )
    if not (gt >= 0).any():
        raise EvaluationError(f"Video {video!r} has no labelled frames (empty ground truth); drop it.")
    bad_gt = gt[(gt < -1) | (gt >= n_classes)]
    if len(bad_gt):
        raise EvaluationError(
            f"Video {video!r}: ground-truth label {int(bad_gt[0])} is not -1 or a class id "
            f"0..{n_classes - 1}; fix the labels or the class names."
        )
    bad = pred[(gt >= 0) & ((pred < 0) | (pred >= n_classes))]
    if len(bad):
        raise EvaluationError(
            f"Video {video!r}: predicted label {int(bad[0])} is not a class id 0..{n_classes - 1}; "
            "predict one of the dataset's phases for every labelled frame."
        )


def video_scores(pred: np.ndarray, gt: np.ndarray, spec: RelaxedSpec, video: str = "#0") -> dict:
    """Relaxed accuracy and per-phase precision/recall/Jaccard of one video (percent; NaN = undefined)."""
    pred, gt = np.asarray(pred).astype(np.int64), np.asarray(gt).astype(np.int64)
    c = len(spec.class_names)
    _check_video(video, pred, gt, c)
    relaxed = relax_predictions(pred, gt, spec)
    keep = gt >= 0
    g, p = gt[keep], relaxed[keep]
    conf = np.bincount(g * c + p, minlength=c * c).reshape(c, c)
    tp = np.diagonal(conf).astype(np.float64)
    support, predicted = conf.sum(1).astype(np.float64), conf.sum(0).astype(np.float64)
    union = support + predicted - tp
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(support > 0, tp / support * 100.0, np.nan)
        precision = np.where(predicted > 0, tp / predicted * 100.0, np.where(support > 0, 0.0, np.nan))
        jaccard = np.where(union > 0, tp / union * 100.0, np.nan)
    return {
        "accuracy": float((g == p).mean() * 100.0),
        "precision": precision,
        "recall": recall,
        "jaccard": jaccard,
        "forgiven_frames": int(((pred[keep] != g) & (p == g)).sum()),
    }


def _nanmean(x: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Mean over the defined (non-NaN) entries, NaN where none is defined (no RuntimeWarning)."""
    defined = ~np.isnan(x)
    total = np.where(defined, x, 0.0).sum(axis=axis)
    count = defined.sum(axis=axis)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _std(x: np.ndarray) -> float:
    """Sample std (ddof=1, MATLAB's `std`) over videos; NaN for a single video."""
    return float(np.std(x, ddof=1)) if len(x) > 1 else float("nan")


def relaxed_metrics(
    preds: Mapping[str, np.ndarray], gts: Mapping[str, np.ndarray], spec: RelaxedSpec
) -> dict:
    """The ``relaxed`` results block: means and stds over videos, phase-first means, per phase, per video."""
    videos = list(gts)
    missing = [v for v in videos if v not in preds]
    if missing:
        raise EvaluationError(f"No predictions for videos {missing[:5]}; predict every scored video.")
    if not videos:
        raise EvaluationError("No videos to score with relaxed metrics.")
    scores = [video_scores(preds[v], gts[v], spec, v) for v in videos]
    keys = ("precision", "recall", "jaccard")
    per_phase_video = {k: np.stack([s[k] for s in scores]) for k in keys}  # [V, C]
    per_video_values = {"accuracy": np.array([s["accuracy"] for s in scores])}
    per_video_values.update({k: np.asarray(_nanmean(per_phase_video[k], axis=1)) for k in keys})
    per_phase = {k: np.asarray(_nanmean(per_phase_video[k], axis=0)) for k in keys}
    metric_keys = ("accuracy", *keys)
    return {
        "definition": DEFINITION,
        "dataset": spec.dataset,
        "fps": spec.fps,
        "tolerance_s": spec.tolerance_s,
        "window_frames": spec.window,
        "videos": len(videos),
        "forgiven_frames": int(sum(s["forgiven_frames"] for s in scores)),
        "metrics": {k: float(np.mean(per_video_values[k])) for k in metric_keys},
        "metrics_std": {k: _std(per_video_values[k]) for k in metric_keys},
        "phase_mean": {k: float(_nanmean(per_phase[k])) for k in keys},
        "per_phase": {
            name: {k: float(per_phase[k][i]) for k in keys} for i, name in enumerate(spec.class_names)
        },
        "per_video": {
            v: {
                **{k: float(per_video_values[k][i]) for k in metric_keys},
                "forgiven_frames": scores[i]["forgiven_frames"],
            }
            for i, v in enumerate(videos)
        },
    }
