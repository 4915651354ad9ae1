"""What a probe says about frames: a phase probe's class probabilities and predicted class, a regression
probe's minutes (``remaining_min``, ``next_<class>_min``), a multi-label probe's probability per label
(``tool_<name>``, ``triplet_<name>``, ``cvs_<name>``) and the labels ``present`` - for a whole video
(`video_outputs`), frame by frame online (`OnlineHead`), and as one frame's fields of a CSV row or JSON line
(`frame_fields`).

Why one module: the offline run, the online run and every output ask the same question of a probe; a
new kind of output (a regression task's minutes) is added here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from plstitch_eval.probes import Probe
from plstitch_eval.probes.probe import PRESENT_FIELD

FIXED_COLUMNS = ("time_s", "frame_index", "predicted")
PROGRESSION_COLUMN = "progression"


def probability_columns(class_names: Sequence[str]) -> list[str]:
    """One column per class, named by the class (`p(<name>)` where a name would clash with another column)."""
    taken = {*FIXED_COLUMNS, PROGRESSION_COLUMN}
    return [f"p({name})" if name in taken else name for name in class_names]


def video_outputs(probe: Probe, features: np.ndarray, frame_times: np.ndarray) -> dict[str, Any]:
    """A `VideoPrediction`'s probe fields for one whole video: probabilities [T, C] and predicted ids [T] of
    a phase probe; a regression probe's values [T, K] (minutes) or a multi-label probe's (probability per
    label) and their columns (no classes: [T, 0], [])."""
    if probe.gives_classes:
        return {"probabilities": probe.probabilities(features), "predicted": probe.predict(features)}
    return value_fields(probe, probe.values(features, frame_times))


def value_fields(probe: Probe, values: np.ndarray) -> dict[str, Any]:
    """The `VideoPrediction` fields of a regression or multi-label probe's values [T, K]: no classes, the
    values and their columns, and a multi-label probe's labels present per frame."""
    fields = {
        "probabilities": np.zeros((len(values), 0), np.float32),
        "predicted": np.zeros(0, np.int64),
        "values": values,
        "columns": probe.value_columns,
    }
    if probe.is_multilabel:
        fields["present"] = [";".join(probe.present(row)) for row in values]
    return fields


def frame_fields(probe: Probe, probabilities: np.ndarray | None, predicted: int | None, values=None) -> dict:
    """One frame's probe fields, in CSV column order: ``predicted`` and a probability per class, a
    regression probe's minutes per column, or a multi-label probe's probability per label and ``present``
    (the labels above their thresholds, `;`-joined)."""
    if probe.is_multilabel:
        row = dict(zip(probe.value_columns, map(float, values), strict=True))
        return {**row, PRESENT_FIELD: ";".join(probe.present(values))}
    if probe.is_regression:
        return dict(zip(probe.value_columns, map(float, values), strict=True))
    row: dict[str, Any] = {"predicted": probe.class_names[int(predicted)]}
    row.update(zip(probability_columns(probe.class_names), map(float, probabilities), strict=True))
    return row


def headline(probe: Probe, values: np.ndarray) -> str:
    """A regression probe's newest minutes in words: ``remaining 23.4 min`` or the next classes within reach,
    e.g. ``next Clipping 1.2 min, Hook 0.4 min`` (outputs at the horizon are out of reach and left out); a
    multi-label probe's labels present, e.g. ``Grasper, Hook present`` (``no tools present``)."""
    if probe.is_multilabel:
        present = probe.present(values)
        return f"{', '.join(present)} present" if present else f"no {probe.task_name} present"
    if probe.task_name == "rsd" or len(values) == 1:
        name = "remaining" if probe.task_name == "rsd" else probe.class_names[0]
        return f"{name} {float(values[0]):.1f} min"
    horizon = (probe.task or {}).get("horizon_min")
    near = [
        (float(v), name)
        for v, name in zip(values, probe.class_names, strict=True)
        if horizon is None or float(v) < float(horizon) - 1e-6
    ]
    if not near:
        return f"nothing within {horizon:g} min"
    return "next " + ", ".join(f"{name} {v:.1f} min" for v, name in sorted(near)[:3])


class OnlineHead:
    """Features and outputs of the frames decoded so far; the probe's output for the newest frame."""

    def __init__(self, probe: Probe, framewise: bool) -> None:
        self.probe = probe
        self.framewise = framewise
        self.features: list[np.ndarray] = []
        self.times: list[float] = []
        self.probabilities: list[np.ndarray] = []
        self.predicted: list[int] = []
        self.values: list[np.ndarray] = []
        self.indices: list[int] = []

    def push(self, feature: np.ndarray, time_s: float, index: int | None = None) -> None:
        """Add frame t's feature and compute the probe's output at t (the new frame alone for a framewise
        probe; else the whole prefix, whose last row a causal probe gives exactly as offline)."""
        self.features.append(feature)
        self.times.append(time_s)
        self.indices.append(len(self.indices) if index is None else index)
        window = feature[None] if self.framewise else np.stack(self.features)
        if not self.probe.gives_classes:
            times = self.times[-1:] if self.framewise else self.times
            self.values.append(self.probe.values(window, np.asarray(times, np.float64))[-1])
            return
        logits = self.probe.logits(window)
        self.probabilities.append(self.probe.probabilities(window)[-1])
        self.predicted.append(int(logits[-1].argmax()))

    def newest(self) -> dict[str, Any]:
        """The newest frame's probe fields (`frame_fields`)."""
        if not self.probe.gives_classes:
            return frame_fields(self.probe, None, None, self.values[-1])
        return frame_fields(self.probe, self.probabilities[-1], self.predicted[-1])

    def newest_text(self) -> tuple[str, float | None]:
        """The newest frame in words for the per-second line: (phase, its probability) or (minutes, None)."""
        if not self.probe.gives_classes:
            return headline(self.probe, self.values[-1]), None
        predicted = self.predicted[-1]
        return self.probe.class_names[predicted], float(self.probabilities[-1][predicted])

    def video_fields(self) -> dict[str, Any]:
        """The `VideoPrediction` probe fields of the frames seen."""
        if not self.probe.gives_classes:
            k = len(self.probe.value_columns)
            return value_fields(self.probe, np.stack(self.values) if self.values else np.zeros((0, k)))
        return {
            "probabilities": np.stack(self.probabilities) if self.probabilities else np.zeros((0, 0)),
            "predicted": np.asarray(self.predicted, dtype=np.int64),
        }
