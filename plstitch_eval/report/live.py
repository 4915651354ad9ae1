"""What a predict folder says of a live case beside its CSVs, where predict was told to write them there:
the summary JSON (`--json DIR/summary.json`: the source, how the video ended, the `live` block of dropped
frames and gaps) and the per-frame lines (`--jsonl DIR/frames.jsonl`: each frame's latency).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.report.case import TIME, CaseVideo, LiveRecord


def read_summary(folder: Path) -> dict[str, Any] | None:
    """The predict summary JSON in the folder (`predict --json DIR/NAME.json`), if one is there."""
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue  # not the summary (predict writes it atomically: never half a file)
        if isinstance(data, dict) and isinstance(data.get("videos"), list) and "class_names" in data:
            return data
    return None


def read_frame_lines(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The `--jsonl` lines in the folder's `*.jsonl` files, per video (a last line cut by a kill: skipped)."""
    lines: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        texts = path.read_text(encoding="utf-8").splitlines()
        for number, text in enumerate(texts, start=1):
            try:
                row = json.loads(text)
            except json.JSONDecodeError:
                if number == len(texts):
                    continue  # written up to a kill: the last line may be cut
                raise ConfigError(
                    f"{path} line {number} is not JSON; move the file out of the folder or repair it."
                ) from None
            if isinstance(row, dict) and "latency_s" in row and TIME in row:
                lines.setdefault(str(row.get("video", "")), []).append(row)
    return lines


def note_summary(video: CaseVideo, entry: dict[str, Any], online: bool, lines: list[dict] | None) -> None:
    """What the summary and the `--jsonl` lines say of the video: its source, how it ended, the live
    record (latency, drops, gaps) of an online case."""
    video.source = entry.get("source", video.source)
    video.ended = entry.get("ended", video.ended)
    video.online = video.online or online or bool(lines)
    block = entry.get("live") or {}
    if not lines and not block:
        return
    rows = lines or []
    video.live = LiveRecord(
        frame_times=np.asarray([float(r[TIME]) for r in rows], dtype=np.float64),
        latency_s=np.asarray([float(r["latency_s"]) for r in rows], dtype=np.float64),
        dropped=int(block.get("dropped", max((int(r.get("dropped", 0)) for r in rows), default=0))),
        due=block.get("due"),
        kept_up=block.get("kept_up"),
        gaps=list(block.get("gaps", [])),
    )
