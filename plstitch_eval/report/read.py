"""A `plstitch predict` output folder read back: each `<video>.csv` as the tracks a report draws (the phase
probe's predicted classes, a regression probe's minutes, a tools probe's presence), with what the folder's
summary JSON and `--jsonl` lines say of each video (`report.live`).

Why apart from the page: what a predict folder holds is one question, answered once; the figures and the
page only draw it. Several folders (one per probe) are merged by video name.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets.base import natural_key
from plstitch_eval.errors import ConfigError
from plstitch_eval.predict.heads import FIXED_COLUMNS, PROGRESSION_COLUMN
from plstitch_eval.report.case import (
    INDEX,
    NEXT,
    NEXT_COLUMN,
    PREDICTED,
    PRESENCE_PREFIXES,
    REMAINING,
    REMAINING_COLUMN,
    TIME,
    TOOL_PREFIX,
    CaseVideo,
    CurveTrack,
    PhaseTrack,
)
from plstitch_eval.report.live import note_summary, read_frame_lines, read_summary

NOT_PREDICT = "pass a folder written by plstitch predict --out DIR"


def read_case(folders: list[Path]) -> list[CaseVideo]:
    """Every video of the predict folders, in natural order of their names (one section each)."""
    videos: dict[str, CaseVideo] = {}
    for folder in folders:
        summary = read_summary(folder)
        lines = read_frame_lines(folder)
        for path in predict_csvs(folder):
            video = videos.setdefault(path.stem, CaseVideo(path.stem))
            probes = (summary or {}).get("probes")
            if isinstance(probes, list) and probes:  # several probes in one run: columns <prefix>.<column>
                add_case_csv(video, path, probes)
            else:
                add_csv(video, path, (summary or {}).get("class_names"))
            entry = next((v for v in (summary or {}).get("videos", []) if v.get("video") == path.stem), {})
            note_summary(video, entry, bool((summary or {}).get("online")), lines.get(path.stem))
    return [videos[name] for name in sorted(videos, key=natural_key)]


def predict_csvs(folder: Path) -> list[Path]:
    """The `<video>.csv` files of a predict folder; refused in one line when it is none."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder; {NOT_PREDICT}.")
    found = sorted(folder.glob("*.csv"), key=lambda p: natural_key(p.name))
    if not found:
        raise ConfigError(f"{folder} holds no <video>.csv, so it is no predict output; {NOT_PREDICT}.")
    return found


def add_csv(video: CaseVideo, path: Path, class_names: list[str] | None) -> None:
    """Read one predict CSV into `video`'s tracks (several folders: one per probe); a CSV of several probes
    (`<prefix>.<column>`) read without its summary JSON: each prefix as a probe, in column order."""
    header, rows = read_table(path)
    prefixes = list(dict.fromkeys(c.split(".", 1)[0] for c in header[2:] if "." in c))
    if prefixes and PREDICTED not in header and not curve_columns(header):
        add_case_csv(video, path, [{"prefix": prefix} for prefix in prefixes])
        return
    add_table(video, path, header, rows, class_names)


def add_case_csv(video: CaseVideo, path: Path, probes: list[dict]) -> None:
    """Read the CSV of a run of several probes (the summary's `probes`: each one's prefix and classes) into
    `video`'s tracks: each probe's columns as a CSV of its own; the first probe of classes gives the
    phases."""
    header, rows = read_table(path)
    for entry in probes:
        prefix = f"{entry.get('prefix')}."
        columns = [c for c in header if c.startswith(prefix)]
        if not columns or (video.phases is not None and f"{prefix}{PREDICTED}" in columns):
            continue
        own = [TIME, INDEX, *(c[len(prefix) :] for c in columns)]
        own_rows = [
            {TIME: r[TIME], INDEX: r[INDEX], **{c[len(prefix) :]: r[c] for c in columns}} for r in rows
        ]
        add_table(video, path, own, own_rows, entry.get("class_names") or None)


def add_table(
    video: CaseVideo, path: Path, header: list[str], rows: list[dict[str, str]], class_names: list[str] | None
) -> None:
    """One probe's columns of a predict CSV into `video`'s tracks."""
    times = number_column(path, rows, TIME)
    if PREDICTED in header:
        if video.phases is not None:
            raise ConfigError(
                f"{path} and {video.phases.csv} both hold phases of {video.name}; pass one of their folders."
            )
        video.phases = phase_track(path, header, rows, times, class_names)
    curves = curve_columns(header)
    for kind, named in curves.items():
        columns = {label: number_column(path, rows, column) for label, column in named.items()}
        video.curves.append(CurveTrack(path, kind, times, columns))
    if PREDICTED not in header and not curves:
        raise ConfigError(
            f"{path} has no {PREDICTED}, {REMAINING_COLUMN}, next_<class>_min or {TOOL_PREFIX}<name> column "
            f"(it has {', '.join(header)}); {NOT_PREDICT}."
        )


def read_table(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a CSV; one without `time_s` and `frame_index` is no predict CSV."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header, rows = list(reader.fieldnames or []), list(reader)
    missing = [c for c in (TIME, INDEX) if c not in header]
    if missing:
        raise ConfigError(f"{path} has no {missing[0]} column, so it is no predict CSV; {NOT_PREDICT}.")
    return header, rows


def number_column(path: Path, rows: list[dict[str, str]], column: str) -> np.ndarray:
    """A column as float64; a cell that is no number is one line naming the file, line and column."""
    try:
        return np.asarray([float(row[column]) for row in rows], dtype=np.float64)
    except (TypeError, ValueError):
        line = next(i for i, row in enumerate(rows) if not _is_number(row[column])) + 2
        raise ConfigError(f"{path} line {line}: {column} is not a number; {NOT_PREDICT}.") from None


def _is_number(text: str | None) -> bool:
    try:
        float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


def curve_columns(header: list[str]) -> dict[str, dict[str, str]]:
    """The curves a CSV holds: kind -> {label: column} (rsd, anticipation per class, tools per tool, and
    likewise triplets and CVS criteria)."""
    found: dict[str, dict[str, str]] = {}
    for column in header:
        match = NEXT_COLUMN.match(column)
        if column == REMAINING_COLUMN:
            found.setdefault(REMAINING, {})["remaining"] = column
        elif match:
            found.setdefault(NEXT, {})[match["name"]] = column
        else:
            prefix = next(
                (p for p in PRESENCE_PREFIXES if column.startswith(p) and len(column) > len(p)), None
            )
            if prefix is not None:
                found.setdefault(PRESENCE_PREFIXES[prefix], {})[column[len(prefix) :]] = column
    return found


def phase_track(path, header, rows, times, class_names: list[str] | None) -> PhaseTrack:
    """The predicted classes as ids of the class list: the summary's, else the CSV's probability columns
    (`p(<name>)` where predict renamed a clashing one), else the names in order of appearance."""
    taken = {*FIXED_COLUMNS, PROGRESSION_COLUMN}
    start = header.index(PREDICTED) + 1
    named = [c for c in header[start:] if c != PROGRESSION_COLUMN and not _is_curve(c)]
    from_columns = [c[2:-1] if c.startswith("p(") and c[2:-1] in taken else c for c in named]
    names = list(class_names or from_columns)
    predicted = [row[PREDICTED] for row in rows]
    names = names or list(dict.fromkeys(predicted))
    index = {name: i for i, name in enumerate(names)}
    unknown = next((i for i, name in enumerate(predicted) if name not in index), None)
    if unknown is not None:
        raise ConfigError(
            f"{path} line {unknown + 2}: predicted class {predicted[unknown]!r} is not one of its classes "
            f"({', '.join(names)}); {NOT_PREDICT}."
        )
    ids = np.asarray([index[name] for name in predicted], dtype=np.int64)
    return PhaseTrack(path, times, ids, names)


def _is_curve(column: str) -> bool:
    return bool(curve_columns([column]))
