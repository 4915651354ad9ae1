"""One video under several probes: `CaseHeads` (every probe's head fed its backbone's feature per frame,
online), `CasePrediction` (their `VideoPrediction`s side by side) and its files: one `<video>.csv`
whose probe columns are prefixed (`<prefix>.<column>`) and one timeline per probe (`<video>.<prefix>.png`).

Why apart from `outputs`: a lone probe's files stay exactly as they were; what several probes add is here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.analysis.style import save_figure
from plstitch_eval.predict.heads import OnlineHead, video_outputs
from plstitch_eval.predict.outputs import (
    VideoPrediction,
    case_paths,
    plot_prediction,
    probe_cells,
    table_text,
)
from plstitch_eval.predict.probeset import ProbeSet
from plstitch_eval.utils.io import write_text_atomic

# the per-video summary fields every probe shares (the others are each probe's, under `probes`)
COMMON_FIELDS = ("video", "source", "frames", "seconds", "wall_seconds", "ended", "last_time_s")


def head_prediction(head: OnlineHead, **common: Any) -> VideoPrediction:
    """One online head's `VideoPrediction` of the frames seen, with the fields every probe shares."""
    task = head.probe.task_name if head.probe.is_regression else None
    return VideoPrediction(**common, **head.video_fields(), task=task)


def own_labels(probes: ProbeSet, labels: np.ndarray | None) -> list[np.ndarray | None]:
    """The labels (read with the set's label classes) for each probe: None for a probe of other classes."""
    wanted = probes.label_classes
    return [labels if p.label_classes == wanted else None for p in probes.probes]


@dataclass
class CasePrediction:
    """Several probes' predictions of one video, on the same frames (`parts`, in the set's order); the
    temporal head's progression once, for the video."""

    probes: ProbeSet
    parts: list[VideoPrediction]
    progression: np.ndarray | None = None
    files: dict[str, str] = field(default_factory=dict)

    @property
    def first(self) -> VideoPrediction:
        return self.parts[0]

    video = property(lambda self: self.first.video)
    source = property(lambda self: self.first.source)
    frame_times = property(lambda self: self.first.frame_times)
    frame_indices = property(lambda self: self.first.frame_indices)
    frames = property(lambda self: self.first.frames)
    last_time = property(lambda self: self.first.last_time)
    ended = property(lambda self: self.first.ended)
    live = property(lambda self: self.first.live)
    wall_seconds = property(lambda self: self.first.wall_seconds)
    black_margin = property(lambda self: self.first.black_margin)

    def summary(self, class_names: Sequence[str] | None = None) -> dict[str, Any]:
        """JSON-ready: the shared fields once, each probe's own under `probes.<prefix>`, then the files."""
        each = [part.summary(p.class_names) for p, part in zip(self.probes.probes, self.parts, strict=True)]
        shared = {key: each[0][key] for key in COMMON_FIELDS if key in each[0]}
        shared["probes"] = {
            prefix: {
                k: v for k, v in one.items() if k not in (*COMMON_FIELDS, "files", "black_margin", "live")
            }
            for prefix, one in zip(self.probes.prefixes, each, strict=True)
        }
        shared["black_margin"] = each[0]["black_margin"]
        if "live" in each[0]:
            shared["live"] = each[0]["live"]
        shared["files"] = dict(self.files)
        return shared


def of_backbone(features: Any, probes: ProbeSet, index: int) -> Any:
    """The features the probe at `index` reads: one backbone's `features`, or its backbone's of a list."""
    return features[probes.group(index)] if isinstance(features, (list, tuple)) else features


def case_prediction(
    probes: ProbeSet,
    features: np.ndarray | Sequence[np.ndarray],
    progression: np.ndarray | None,
    **common: Any,
) -> CasePrediction:
    """Every probe on one whole video's features (offline; a list: each backbone's, in backbone order);
    `common` holds the fields they share."""
    labels = own_labels(probes, common.pop("labels", None))
    parts = [
        VideoPrediction(
            **common,
            **video_outputs(probe, of_backbone(features, probes, i), common["frame_times"]),
            task=probe.task_name if probe.is_regression else None,
            labels=own,
        )
        for i, (probe, own) in enumerate(zip(probes.probes, labels, strict=True))
    ]
    return CasePrediction(probes, parts, progression)


class CaseHeads:
    """Every probe's `OnlineHead`, each fed the one feature a frame gets (online); reads as one head whose
    fields are prefixed by probe."""

    def __init__(self, probes: ProbeSet, framewise_kinds: Sequence[str]) -> None:
        self.probes = probes
        self.heads = [OnlineHead(p, p.kind in framewise_kinds) for p in probes.probes]

    features = property(lambda self: self.heads[0].features)
    times = property(lambda self: self.heads[0].times)
    indices = property(lambda self: self.heads[0].indices)

    def push(
        self, feature: np.ndarray | Sequence[np.ndarray], time_s: float, index: int | None = None
    ) -> None:
        """One frame's feature to every head (a list: each backbone's, to the heads of its probes)."""
        for i, head in enumerate(self.heads):
            head.push(of_backbone(feature, self.probes, i), time_s, index)

    def newest(self) -> dict[str, Any]:
        """The newest frame's fields of every probe, each named `<prefix>.<column>`."""
        return {
            self.probes.column(prefix, key): value
            for prefix, head in zip(self.probes.prefixes, self.heads, strict=True)
            for key, value in head.newest().items()
        }

    def newest_text(self) -> tuple[str, float | None]:
        """Every probe's newest output in words, e.g. `phases: Clipping p=0.83 | rsd: remaining 12.0 min`."""
        texts = []
        for prefix, head in zip(self.probes.prefixes, self.heads, strict=True):
            text, probability = head.newest_text()
            texts.append(f"{prefix}: {text}" + ("" if probability is None else f" p={probability:.2f}"))
        return " | ".join(texts), None

    def prediction(self, progression: np.ndarray | None = None, **common: Any) -> CasePrediction:
        """The `CasePrediction` of the frames seen; `common` holds the fields the probes share."""
        labels = own_labels(self.probes, common.pop("labels", None))
        parts = [
            head_prediction(head, **common, labels=own) for head, own in zip(self.heads, labels, strict=True)
        ]
        return CasePrediction(self.probes, parts, progression)


def online_heads(probes: ProbeSet, framewise_kinds: Sequence[str]) -> OnlineHead | CaseHeads:
    """The online heads of a run: a lone probe's `OnlineHead`, or every probe's (`CaseHeads`)."""
    if probes.single:
        return OnlineHead(probes.first, probes.first.kind in framewise_kinds)
    return CaseHeads(probes, framewise_kinds)


def online_prediction(state: OnlineHead | CaseHeads, **common: Any) -> VideoPrediction | CasePrediction:
    """What the online heads saw, as a `VideoPrediction` (one probe) or a `CasePrediction` (several)."""
    if isinstance(state, CaseHeads):
        return state.prediction(**common)
    return head_prediction(state, **common)


def write_case(case: CasePrediction, out: str | Path, title: str) -> dict[str, str]:
    """Write `<video>.csv` (every probe's columns, prefixed) and each probe's `<video>.<prefix>.png` under
    `out`, each atomically; returns their paths (`csv`, then `png.<prefix>`)."""
    csv_path, *figures = case_paths(out, case.video, case.probes.prefixes)
    headers, cells = [], []
    for (prefix, probe), part in zip(case.probes.named(), case.parts, strict=True):
        header, rows = probe_cells(part, probe.class_names)
        headers.append([case.probes.column(prefix, name) for name in header])
        cells.append(rows)
    frame = VideoPrediction(
        case.video, case.source, case.frame_times, np.zeros((case.frames, 0)), np.zeros(0, np.int64),
        progression=case.progression, frame_indices=case.frame_indices,
    )  # fmt: skip
    write_text_atomic(csv_path, table_text(frame, headers, cells))
    case.files = {"csv": str(csv_path)}
    for (prefix, probe), part, png_path in zip(case.probes.named(), case.parts, figures, strict=True):
        part.progression = case.progression
        save_figure(plot_prediction(part, probe.class_names, f"{title} - {prefix}"), png_path)
        part.progression = None
        case.files[f"png.{prefix}"] = str(png_path)
    return case.files
