"""Dataset adapter base class, the per-video record, and label lookup at sampled frame times."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from plstitch_eval.data.decoders import PYAV, Decoding, read_frames
from plstitch_eval.data.media import VIDEO_EXTENSIONS
from plstitch_eval.data.video import DecodedFrame
from plstitch_eval.errors import ConfigError, DataError
from plstitch_eval.utils.console import logger

SPLIT_NAMES = ("train", "val", "test")


@dataclass
class VideoRecord:
    """One video of a dataset: its source (file or frame folder) and its labels at `label_fps`.

    `labels[i]` is the class id of annotation step i, i.e. of time ``i / label_fps`` seconds.
    `folder_fps` is the frame rate of a frame-folder source (None for video files). Datasets with instrument
    annotations (Cholec80) add `tools`: presence [M, K] int8 of the adapter's `tool_names` at `tool_times`;
    datasets with action triplets (CholecT50) add `triplets`: multi-hot [M, T] int8 of `triplet_names` at
    `triplet_times`; datasets with the critical view of safety (Endoscapes) add `cvs`: the raters' mean of
    C1-C3 [M, 3] at `cvs_times`; datasets with skill ratings (JIGSAWS) add `skill`: the video's scores by
    name, and `skill_level`: its self-proclaimed experience.
    """

    name: str
    source: Path
    labels: np.ndarray  # [N] int64 class ids
    label_fps: float
    folder_fps: float | None = None
    tools: np.ndarray | None = None  # [M, K] int8 0/1, one row per annotated time
    tool_times: np.ndarray | None = None  # [M] float64 seconds of those rows
    triplets: np.ndarray | None = None  # [M, T] int8 0/1, one row per annotated time
    triplet_times: np.ndarray | None = None  # [M] float64 seconds of those rows
    cvs: np.ndarray | None = None  # [M, 3] float64 raters' mean of C1-C3 (0..1), one row per annotated time
    cvs_times: np.ndarray | None = None  # [M] float64 seconds of those rows
    skill: dict[str, float] | None = None  # per-video scores, e.g. {"grs": 13.0, "respect_for_tissue": 3.0}
    skill_level: str | None = None  # self-proclaimed experience, e.g. "N", "I", "E" (JIGSAWS)


def labels_at(record: VideoRecord, times: np.ndarray | list[float]) -> tuple[np.ndarray, int]:
    """Labels at sample `times` (s): step ``floor(t * label_fps)``; samples past the last label are dropped.

    Returns (labels for the kept leading samples, number dropped); like the literature we truncate to the
    shorter of video and annotation, and log a warning with the count.
    """
    times = np.asarray(times, dtype=np.float64)
    steps = np.floor(np.maximum(times, 0.0) * record.label_fps + 1e-6).astype(np.int64)
    past_end = steps >= len(record.labels)
    keep = int(np.argmax(past_end)) if past_end.any() else len(steps)
    n_dropped = len(steps) - keep
    if n_dropped:
        logger.warning(
            "%s: %d of %d sampled frames lie past the last annotation (%d labels at %g fps); dropped",
            record.name,
            n_dropped,
            len(steps),
            len(record.labels),
            record.label_fps,
        )
    return record.labels[steps[:keep]].astype(np.int64), n_dropped


def tools_at(record: VideoRecord, times: np.ndarray | list[float]) -> np.ndarray | None:
    """Tool presence [n, K] int8 at sample `times` (s): the last annotated row at or before each time; -1
    where no row covers it (before the first row, or over one row spacing past the last); None without tools.
    """
    if record.tools is None or record.tool_times is None:
        return None
    return _rows_at(record.tools, record.tool_times, times)


def triplets_at(record: VideoRecord, times: np.ndarray | list[float]) -> np.ndarray | None:
    """Triplet multi-hot [n, T] int8 at sample `times` (s), by `tools_at`'s rule; None without triplets."""
    if record.triplets is None or record.triplet_times is None:
        return None
    return _rows_at(record.triplets, record.triplet_times, times)


def cvs_at(
    record: VideoRecord, times: np.ndarray | list[float], tolerance_s: float = 0.5
) -> np.ndarray | None:
    """CVS raters' means [n, 3] float64 at sample `times` (s): each annotated row goes to the one sample
    nearest its time (if within `tolerance_s`); NaN elsewhere, as CVS is scored on annotated frames only."""
    if record.cvs is None or record.cvs_times is None:
        return None
    times = np.asarray(times, dtype=np.float64)
    out = np.full((len(times), 3), np.nan)
    if not len(times):
        return out
    for row, row_time in zip(record.cvs, np.asarray(record.cvs_times, dtype=np.float64), strict=True):
        nearest = int(np.argmin(np.abs(times - row_time)))
        if abs(times[nearest] - row_time) <= tolerance_s + 1e-9:
            out[nearest] = row
    return out


def _rows_at(values: np.ndarray, row_times: np.ndarray, times: np.ndarray | list[float]) -> np.ndarray:
    """`values` [M, K] annotated at `row_times`, read at `times`: the last row at or before each time; -1
    where no row covers it (before the first row, or over one row spacing past the last)."""
    times = np.asarray(times, dtype=np.float64)
    row_times = np.asarray(row_times, dtype=np.float64)
    out = np.full((len(times), values.shape[1]), -1, dtype=np.int8)
    if not len(row_times):
        return out
    spacing = float(np.median(np.diff(row_times))) if len(row_times) > 1 else 1.0
    rows = np.searchsorted(row_times, times + 1e-6, side="right") - 1
    covered = (rows >= 0) & (times < row_times[-1] + spacing - 1e-6)
    out[covered] = values[rows[covered]]
    return out


def decode(
    record: VideoRecord, fps: float | None = None, size: int | None = None, decoding: Decoding = PYAV
) -> Iterator[DecodedFrame]:
    """Decode a record's source at `fps` (None = every frame), shorter side resized to `size`, with
    `decoding`'s decoder (frames on the host)."""
    return read_frames(record.source, fps, size, folder_fps=record.folder_fps, decoding=decoding)


class DatasetAdapter:
    """Knows one dataset's layout, classes, frame rates and splits; `videos()` parses and validates it.

    Subclasses set the class attributes and implement `_load()` (parse all videos) and `_scheme_splits()`.
    """

    name: ClassVar[str] = ""
    display_name: ClassVar[str] = ""  # printed name (cards, tables); empty = `name`
    family: ClassVar[str] = "surgical"  # "surgical" (accuracy, macro F1) or "cooking" (Edit, F1@k)
    class_names: list[str] = []
    native_fps: float = 25.0
    default_eval_fps: float = 1.0
    background_classes: list[str] = []
    tool_names: ClassVar[list[str]] = []  # instruments annotated per frame (multi-label), if any
    triplet_names: ClassVar[list[str]] = []  # action triplets annotated per frame (multi-label), if any
    cvs_names: ClassVar[list[str]] = []  # critical-view-of-safety criteria rated on some frames, if any
    split_schemes: ClassVar[tuple[str, ...]] = ("default",)
    # the data's terms of use (a published probe's card takes the strictest of these and its backbone's)
    license: ClassVar[str] = "unknown"
    license_source: ClassVar[str] = ""  # where the licence is stated

    def __init__(self, root: str | os.PathLike, fps: float | None = None) -> None:
        self.root = Path(root).expanduser()
        if not self.root.is_dir():
            raise DataError(f"{self.root}: dataset root of '{self.name}' does not exist; pass --root DIR")
        if fps is not None and fps <= 0:
            raise ConfigError(f"fps must be positive, got {fps}")
        self._fps = fps
        self._records: list[VideoRecord] | None = None

    @property
    def eval_fps(self) -> float:
        """Sampling rate for evaluation: the dataset's convention unless overridden with `fps`."""
        return float(self._fps) if self._fps is not None else float(self.default_eval_fps)

    def videos(self, split: str | None = None, scheme: str | None = None) -> list[VideoRecord]:
        """All parsed videos (sorted by name), or those of one split of `scheme`."""
        if self._records is None:
            self._records = sorted(self._load(), key=lambda r: natural_key(r.name))
            if not self._records:
                raise DataError(f"{self.root}: no videos of '{self.name}' found; check the layout (README)")
        if split is None or split == "all":
            return list(self._records)
        wanted = set(self.splits(scheme).get(split, [])) if split in SPLIT_NAMES else None
        if wanted is None:
            raise ConfigError(f"unknown split '{split}'; use one of {', '.join(SPLIT_NAMES)} or all")
        return [r for r in self._records if r.name in wanted]

    def video_names(self) -> list[str]:
        """Names of all videos, sorted naturally."""
        return [r.name for r in self.videos()]

    def splits(self, scheme: str | None = None) -> dict[str, list[str]]:
        """Official split `scheme` (None = the default) as {"train", "val", "test"} -> video names present."""
        key = self._check_scheme(scheme)
        names = self.video_names()
        chosen = {s: set(members) for s, members in self._scheme_splits(key, names).items()}
        return {s: [n for n in names if n in chosen.get(s, ())] for s in SPLIT_NAMES}

    def kfold(self, n_folds: int, seed: int = 0) -> list[dict[str, list[str]]]:
        """K folds by video: videos shuffled with `seed`, cut into `n_folds` near-equal test chunks."""
        names = self.video_names()
        if not 2 <= n_folds <= len(names):
            raise ConfigError(
                f"n_folds must be between 2 and the number of videos ({len(names)}), got {n_folds}"
            )
        order = np.random.default_rng(seed).permutation(len(names))
        chunks = np.array_split(order, n_folds)
        folds = []
        for chunk in chunks:
            test = set(chunk.tolist())
            folds.append(
                {
                    "train": [n for i, n in enumerate(names) if i not in test],
                    "val": [],
                    "test": [n for i, n in enumerate(names) if i in test],
                }
            )
        return folds

    def class_index(self) -> dict[str, int]:
        """Map class name -> id (position in `class_names`)."""
        return {c: i for i, c in enumerate(self.class_names)}

    def _check_scheme(self, scheme: str | None) -> str:
        key = self.split_schemes[0] if scheme in (None, "default") else str(scheme).replace("/", "-")
        if key not in self.split_schemes:
            raise ConfigError(
                f"unknown split scheme '{scheme}' for '{self.name}'; "
                f"use one of {', '.join(self.split_schemes)}"
            )
        return key

    def _load(self) -> list[VideoRecord]:
        raise NotImplementedError

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        raise NotImplementedError


def natural_key(text: str) -> list[object]:
    """Sort key that orders embedded numbers numerically (video2 before video10)."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def video_number(name: str) -> int:
    """The last number in a video name (video07 -> 7), used by number-range splits."""
    found = re.findall(r"\d+", name)
    if not found:
        raise DataError(f"video '{name}' has no number in its name; number-range splits need one")
    return int(found[-1])


def by_number(names: list[str], **ranges: tuple[int, int]) -> dict[str, list[str]]:
    """Split names by inclusive number ranges, e.g. train=(1, 40), test=(41, 80)."""
    return {split: [n for n in names if lo <= video_number(n) <= hi] for split, (lo, hi) in ranges.items()}


def find_source(stem: str, folders: list[Path]) -> Path | None:
    """A video file `<folder>/<stem>.<ext>` or frame folder `<folder>/<stem>/`, first found, else None."""
    for folder in folders:
        for ext in VIDEO_EXTENSIONS:
            candidate = folder / f"{stem}{ext}"
            if candidate.is_file():
                return candidate
        if (folder / stem).is_dir():
            return folder / stem
    return None
