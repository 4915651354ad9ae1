"""Parsers of CholecT45's own release (CAMMA-public/cholect45, April 2022): its `dict/*.txt` id-to-name files
and its per-video label files (`triplet/VIDxx.txt`, `instrument/VIDxx.txt`: a frame index, then 0/1 labels).

Layout::

    <root>/data/VID01/000000.png, ...  frames at 1 fps, numbered from 0, 6 digits
    <root>/triplet/VID01.txt           per annotated frame: frame index, then 100 triplet labels 0/1 (commas)
    <root>/instrument/VID01.txt        frame index, then 6 instrument labels 0/1 (verb/, target/: unread)
    <root>/dict/triplet.txt            `0:grasper,dissect,cystic_plate` ... (and instrument.txt, ...)

The release has no phase labels. The adapter (`cholect50.py`) reads it; this module only parses.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets.annotations import read_lines
from plstitch_eval.errors import DataError

DATA_DIR, TRIPLET_DIR, INSTRUMENT_DIR, DICT_DIR = "data", "triplet", "instrument", "dict"
RELEASE_LAYOUT = (
    "data/VIDxx/000000.png ..., triplet/VIDxx.txt and instrument/VIDxx.txt (frame index, then 0/1 labels), "
    "dict/triplet.txt and dict/instrument.txt"
)


def is_release(root: Path) -> bool:
    """True when `root` is laid out as CholecT45's own release (data/ or triplet/ there, no videos/)."""
    return not (root / "videos").is_dir() and any((root / d).is_dir() for d in (DATA_DIR, TRIPLET_DIR))


def required(path: Path, what: str) -> Path:
    """`path` if it exists, else the one-line error naming it and the release layout."""
    if not path.exists():
        raise DataError(f"{path}: {what} is missing; CholecT45 release layout: {RELEASE_LAYOUT}")
    return path


def check_dict(path: Path, names: tuple[str, ...] | list[str]) -> None:
    """Refuse a `dict/*.txt` (`<id>:<name>` lines) whose names or order differ from `names` (our vocabulary:
    ivtmetrics' component maps rely on that order), naming the file and its first differing line."""
    lines = [line.strip() for line in read_lines(required(path, "id-to-name file"))]
    for n, expected in enumerate(f"{i}:{name}" for i, name in enumerate(names)):
        got = lines[n] if n < len(lines) else "the end of the file"
        if got != expected:
            raise DataError(
                f"{path}:{n + 1}: '{got}' differs from our CholecT50 vocabulary's '{expected}'; "
                "this copy's ids would be misread (is it CholecT45's release?)"
            )
    if len(lines) > len(names) and any(lines[len(names) :]):
        raise DataError(f"{path}:{len(names) + 1}: more than the {len(names)} names of our vocabulary")


def read_label_rows(path: Path, n_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """(frame indices [M] int64, labels [M, n_labels] int8) of one `triplet/` or `instrument/` file: rows of
    a frame index and `n_labels` labels 0/1, comma-separated, frames increasing."""
    rows = [(n, line) for n, line in enumerate(read_lines(required(path, "label file")), 1) if line.strip()]
    frames = np.empty(len(rows), dtype=np.int64)
    labels = np.empty((len(rows), n_labels), dtype=np.int8)
    for k, (n, line) in enumerate(rows):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 1 + n_labels:
            raise DataError(
                f"{path}:{n}: expected {1 + n_labels} comma-separated integers (frame index, then {n_labels} "
                f"labels 0/1), got {len(parts)} columns"
            )
        if not parts[0].isdigit():
            raise DataError(f"{path}:{n}: frame index '{parts[0]}' is not an integer >= 0")
        bad = next((c for c, p in enumerate(parts[1:], 1) if p not in ("0", "1")), None)
        if bad is not None:
            raise DataError(f"{path}:{n}: column {bad + 1} is '{parts[bad]}', expected a label 0 or 1")
        frames[k] = int(parts[0])
        labels[k] = [int(p) for p in parts[1:]]
        if k and frames[k] <= frames[k - 1]:
            raise DataError(f"{path}:{n}: frame index {frames[k]} does not follow {frames[k - 1]}")
    return frames, labels
