"""What a case's phase track says in numbers: the time given to each phase, the transitions between phases
(from, to, at), and the accuracy against the truth.

Time rule (as predict's summary and timeline figure, `analysis.timeline.segment_edges`): sampled frame i
covers [t_i, t_(i+1)), the last frame one median step; a phase's time is the sum over its frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from plstitch_eval.analysis.timeline import segment_edges, segments
from plstitch_eval.report.case import PhaseTrack


@dataclass(frozen=True)
class PhaseTime:
    """A phase's predicted time (seconds and share of the case) and its true time when labelled."""

    phase: str
    seconds: float
    share: float
    truth_seconds: float | None = None


@dataclass(frozen=True)
class Transition:
    """The predicted phase changing from one class to another at a time (seconds)."""

    from_phase: str
    to_phase: str
    at_s: float


def frame_seconds(frame_times: np.ndarray) -> np.ndarray:
    """Seconds each sampled frame covers (`segment_edges`)."""
    return np.diff(segment_edges(frame_times)) if len(frame_times) else np.zeros(0)


def phase_times(track: PhaseTrack) -> list[PhaseTime]:
    """Each class that was predicted or is true somewhere, in the probe's class order."""
    seconds = frame_seconds(track.frame_times)
    total = float(seconds.sum())
    out = []
    for c, name in enumerate(track.class_names):
        predicted = float(seconds[track.predicted == c].sum())
        truth = None if track.truth is None else float(seconds[track.truth == c].sum())
        if predicted > 0 or truth:
            out.append(PhaseTime(name, predicted, predicted / total if total else 0.0, truth))
    return out


def transitions(ids: np.ndarray, frame_times: np.ndarray, class_names: list[str]) -> list[Transition]:
    """Every change of class, at the time of the first frame of the new one (negative ids: unlabelled)."""
    runs = segments(ids)
    name = {c: (class_names[c] if c >= 0 else "unlabelled") for _, _, c in runs}
    return [
        Transition(name[before[2]], name[after[2]], float(frame_times[after[0]]))
        for before, after in zip(runs, runs[1:], strict=False)
    ]


def accuracy(track: PhaseTrack) -> float | None:
    """Percent of the labelled frames whose predicted class is the true one (None: no labels)."""
    if track.truth is None:
        return None
    labelled = track.truth >= 0
    return float((track.predicted == track.truth)[labelled].mean() * 100) if labelled.any() else None
