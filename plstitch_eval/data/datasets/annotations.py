"""Parsers of the annotation files the datasets ship; every error names the file, the line and the fix."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plstitch_eval.errors import DataError


def read_lines(path: Path) -> list[str]:
    """Lines of a text file without line endings, or a DataError if it is missing/unreadable."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError(f"{path}: annotation file is missing; check the dataset root and layout") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: cannot read annotation file ({exc})") from exc
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def unknown_class(path: Path, line: int, name: str, class_index: dict[str, int]) -> DataError:
    """The error for a class name not in the dataset's list."""
    return DataError(
        f"{path}:{line}: unknown class '{name}'; expected one of: {', '.join(class_index)} "
        "(fix the file or the dataset's class list)"
    )


def read_phase_tsv(
    path: Path, class_index: dict[str, int], header: tuple[str, ...] | None = ("Frame", "Phase")
) -> np.ndarray:
    """Cholec80-style `Frame<TAB>Phase` file: header, then one row per frame (consecutive numbers) -> ids.

    `header=None` accepts any one header line (M2CAI16's files vary in its text).
    """
    lines = read_lines(path)
    if header is None:
        if not lines:
            raise DataError(f"{path}:1: expected a header line, got an empty file")
    elif not lines or tuple(lines[0].split()) != header:
        got = lines[0].strip() if lines else "an empty file"
        raise DataError(f"{path}:1: expected the header '{chr(9).join(header)}', got '{got}'")
    labels = np.empty(len(lines) - 1, dtype=np.int64)
    first = None
    for n, line in enumerate(lines[1:], start=2):
        parts = line.strip().split(None, 1)
        if len(parts) != 2 or not parts[0].lstrip("-").isdigit():
            raise DataError(f"{path}:{n}: expected '<frame number><TAB><phase name>', got '{line.strip()}'")
        frame = int(parts[0])
        if first is None:
            if frame not in (0, 1):
                raise DataError(f"{path}:{n}: frame numbers must start at 0 (or 1), got {frame}")
            first = frame
        if frame != first + n - 2:
            raise DataError(
                f"{path}:{n}: frame {frame} where {first + n - 2} was expected; "
                "frames must be listed once each, in order, without gaps"
            )
        name = parts[1].strip()
        if name not in class_index:
            raise unknown_class(path, n, name, class_index)
        labels[n - 2] = class_index[name]
    if len(labels) == 0:
        raise DataError(f"{path}: holds a header but no frames")
    return labels


def read_ground_truth(path: Path, class_index: dict[str, int]) -> np.ndarray:
    """MS-TCN `groundTruth/<video>.txt`: one class name per line per frame -> ids."""
    lines = read_lines(path)
    if not lines:
        raise DataError(f"{path}: ground-truth file is empty")
    labels = np.empty(len(lines), dtype=np.int64)
    for n, line in enumerate(lines, start=1):
        name = line.strip()
        if name not in class_index:
            raise unknown_class(path, n, name, class_index)
        labels[n - 1] = class_index[name]
    return labels


def read_mapping(path: Path) -> list[str]:
    """MS-TCN `mapping.txt` (`<id> <name>` per line, ids 0..C-1) -> class names in id order."""
    names: dict[int, str] = {}
    for n, line in enumerate(read_lines(path), start=1):
        parts = line.strip().split(None, 1)
        if len(parts) != 2 or not parts[0].isdigit():
            raise DataError(f"{path}:{n}: expected '<id> <class name>', got '{line.strip()}'")
        if int(parts[0]) in names:
            raise DataError(f"{path}:{n}: class id {parts[0]} is listed twice")
        names[int(parts[0])] = parts[1].strip()
    if sorted(names) != list(range(len(names))):
        raise DataError(f"{path}: class ids must be 0..{len(names) - 1} without gaps, got {sorted(names)}")
    if len(set(names.values())) != len(names):
        raise DataError(f"{path}: a class name is listed twice")
    return [names[i] for i in range(len(names))]


def read_bundle(path: Path) -> list[tuple[int, str]]:
    """MS-TCN `splits/*.bundle`: one ground-truth file name per line -> (line number, video name)."""
    entries = []
    for n, line in enumerate(read_lines(path), start=1):
        name = line.strip()
        if name:
            entries.append((n, name[:-4] if name.endswith(".txt") else name))
    return entries


def read_index_label_table(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """AutoLaparo-style label file: a header line, then `<frame index> <phase id>` rows (tab/space/comma)."""
    lines = read_lines(path)
    if not lines:
        raise DataError(f"{path}: label file is empty")
    frames, ids = [], []
    for n, line in enumerate(lines[1:], start=2):
        parts = line.replace(",", " ").split()
        if len(parts) != 2 or not all(p.lstrip("-").isdigit() for p in parts):
            raise DataError(f"{path}:{n}: expected '<frame index> <phase id>', got '{line.strip()}'")
        frames.append(int(parts[0]))
        ids.append(int(parts[1]))
    if not frames:
        raise DataError(f"{path}: holds a header but no rows")
    frame_arr = np.asarray(frames, dtype=np.int64)
    bad = np.flatnonzero(np.diff(frame_arr) != 1)
    if len(bad):
        n = int(bad[0]) + 3
        raise DataError(
            f"{path}:{n}: frame {frames[bad[0] + 1]} follows {frames[bad[0]]}; "
            "frames must be listed once each, in order, without gaps"
        )
    return frame_arr, np.asarray(ids, dtype=np.int64)


def read_tool_tsv(path: Path, tool_names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Cholec80-style tool file: header `Frame <tool> ...`, then one row per annotated frame of 0/1 values.

    Returns (frame numbers [M] int64, presence [M, K] int8) with the columns in `tool_names` order (the
    header must name exactly those tools, in any order).
    """
    lines = read_lines(path)
    header = lines[0].split() if lines else []
    if not header or header[0] != "Frame" or sorted(header[1:]) != sorted(tool_names):
        got = lines[0].strip() if lines else "an empty file"
        raise DataError(
            f"{path}:1: expected the header 'Frame' and the tools {', '.join(tool_names)} (tab-separated), "
            f"got '{got}'"
        )
    order = [header.index(name) for name in tool_names]
    frames = np.empty(len(lines) - 1, dtype=np.int64)
    presence = np.empty((len(lines) - 1, len(tool_names)), dtype=np.int8)
    for n, line in enumerate(lines[1:], start=2):
        parts = line.split()
        if len(parts) != len(header) or not parts[0].isdigit() or any(p not in ("0", "1") for p in parts[1:]):
            raise DataError(
                f"{path}:{n}: expected a frame number and {len(tool_names)} values 0 or 1, "
                f"got '{line.strip()}'"
            )
        frames[n - 2] = int(parts[0])
        presence[n - 2] = [int(parts[i]) for i in order]
    if len(frames) and (np.diff(frames) <= 0).any():
        bad = int(np.argmax(np.diff(frames) <= 0)) + 3
        raise DataError(f"{path}:{bad}: frame numbers must increase from row to row")
    return frames, presence
