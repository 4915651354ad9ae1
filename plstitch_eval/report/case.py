"""What a report knows of each video (`CaseVideo`): its phase track, its curves (an rsd probe's remaining
minutes, an anticipation probe's minutes per class, a tools probe's presence) and, for a live case, its
latency and drops; and the names of the predict CSV columns they come from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.predict.heads import FIXED_COLUMNS

TIME, INDEX, PREDICTED = FIXED_COLUMNS  # time_s, frame_index, predicted
REMAINING_COLUMN = "remaining_min"  # an rsd probe's column
NEXT_COLUMN = re.compile(r"^next_(?P<name>.+)_min$")  # an anticipation probe's column per class
TOOL_PREFIX = "tool_"  # a tools probe's column per tool: presence probability in [0, 1]
REMAINING, NEXT, TOOLS = "remaining", "next", "tools"  # the kinds of curve a CSV may hold
TRIPLETS, CVS = "triplets", "cvs"  # a triplets / CVS probe's presence, drawn as the tools are
PRESENCE_PREFIXES = {TOOL_PREFIX: TOOLS, "triplet_": TRIPLETS, "cvs_": CVS}  # multi-label columns -> kind


@dataclass
class PhaseTrack:
    """A phase probe's predictions on one video: class id per sampled frame, the class names (the CSV's
    probability columns), and the truth at the same frames when labels were given (-1: unlabelled)."""

    csv: Path
    frame_times: np.ndarray
    predicted: np.ndarray
    class_names: list[str]
    truth: np.ndarray | None = None


@dataclass
class CurveTrack:
    """Values over time from one CSV: an rsd probe's `remaining_min`, an anticipation probe's minutes to
    each class, or a tools probe's presence per tool; `truth`: the true remaining minutes of a labelled
    case."""

    csv: Path
    kind: str
    frame_times: np.ndarray
    columns: dict[str, np.ndarray]
    truth: np.ndarray | None = None


@dataclass
class LiveRecord:
    """What an online run recorded of one video: each frame's latency (`--jsonl` lines), the samples it
    dropped, and the summary's `live` block (due, kept_up, gaps) and `ended`."""

    frame_times: np.ndarray
    latency_s: np.ndarray
    dropped: int
    due: int | None = None
    kept_up: float | None = None
    gaps: list[dict[str, Any]] = field(default_factory=list)

    def latency_ms(self, q: float) -> float | None:
        """The `q` quantile (0.5: median, 0.99: p99) of the latency, in milliseconds; None without lines."""
        return float(np.quantile(self.latency_s, q) * 1000.0) if len(self.latency_s) else None


@dataclass
class CaseVideo:
    """One video of the report: its phase track, curves and live record, and what the summary says of it."""

    name: str
    phases: PhaseTrack | None = None
    curves: list[CurveTrack] = field(default_factory=list)
    live: LiveRecord | None = None
    source: str | None = None  # the video the summary names (a file, stdin, a stream address)
    ended: str | None = None
    online: bool = False
    labelled: bool = False  # labels were given (--labels, --dataset)

    def curve(self, kind: str) -> CurveTrack | None:
        return next((c for c in self.curves if c.kind == kind), None)
