"""Any dataset as videos (or frame folders) plus one per-frame label CSV.

Layout::

    <root>/videos/<video>.mp4   or   <root>/videos/<video>/0001.jpg ...   (video_dir option)
    <root>/labels.csv          header `video,frame,label[,split]`; one row per annotated frame
    <root>/classes.txt         optional: one class name per line, fixing the class order

`frame` counts annotation steps from 0 at `label_fps` (default 1: one label per second); rows of a video
must list frames 0, 1, 2, ... in order. `label` is a class name; without `classes.txt` classes are numbered
in order of first appearance. The optional `split` column (train/val/test, constant per video) gives the
official split; without it every video is in "train" (use `kfold`).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets.annotations import read_lines
from plstitch_eval.data.datasets.base import SPLIT_NAMES, DatasetAdapter, VideoRecord, find_source
from plstitch_eval.data.datasets.registry import register_dataset
from plstitch_eval.errors import DataError

REQUIRED_COLUMNS = ("video", "frame", "label")
CLASSES_FILE = "classes.txt"


@register_dataset("folder")
class FolderDataset(DatasetAdapter):
    """Generic adapter: `videos/` + `labels.csv`; frame rates and file names are options."""

    name = "folder"
    native_fps = 1.0  # replaced by the `label_fps` option
    default_eval_fps = 1.0

    def __init__(
        self,
        root: str | os.PathLike,
        fps: float | None = None,
        labels: str = "labels.csv",
        video_dir: str = "videos",
        label_fps: float = 1.0,
        folder_fps: float | None = None,
    ) -> None:
        super().__init__(root, fps)
        self.labels_file = self.root / labels
        self.video_dir = video_dir
        self.native_fps = self.default_eval_fps = float(label_fps)
        self.folder_fps = float(folder_fps) if folder_fps else float(label_fps)
        self._split_of: dict[str, str] = {}
        self._rows = self._read_csv()

    def _read_csv(self) -> dict[str, list[tuple[int, int, str]]]:
        """Rows grouped by video as (line, frame, label name); sets class_names."""
        if not self.labels_file.is_file():
            raise DataError(f"{self.labels_file}: label CSV is missing (header video,frame,label[,split])")
        fixed = self.root / CLASSES_FILE
        names = [ln.strip() for ln in read_lines(fixed) if ln.strip()] if fixed.is_file() else []
        with self.labels_file.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(f"{self.labels_file}:1: header lacks column(s) {', '.join(missing)}")
            rows: dict[str, list[tuple[int, int, str]]] = {}
            for row in reader:
                line = reader.line_num
                video, frame, label = (str(row[c] or "").strip() for c in REQUIRED_COLUMNS)
                if not video or not frame.isdigit() or not label:
                    raise DataError(f"{self.labels_file}:{line}: expected video,frame(>=0 integer),label")
                if label not in names:
                    if fixed.is_file():
                        raise DataError(f"{self.labels_file}:{line}: class '{label}' is not in {fixed}")
                    names.append(label)
                self._note_split(video, (row.get("split") or "").strip(), line)
                rows.setdefault(video, []).append((line, int(frame), label))
        self.class_names = names
        return rows

    def _note_split(self, video: str, split: str, line: int) -> None:
        if not split:
            return
        if split not in SPLIT_NAMES:
            raise DataError(
                f"{self.labels_file}:{line}: split '{split}' is not one of {', '.join(SPLIT_NAMES)}"
            )
        if self._split_of.setdefault(video, split) != split:
            raise DataError(f"{self.labels_file}:{line}: video {video} is in two splits")

    def _load(self) -> list[VideoRecord]:
        index = self.class_index()
        records = []
        for video, rows in self._rows.items():
            for expected, (line, frame, _) in enumerate(rows):
                if frame != expected:
                    raise DataError(
                        f"{self.labels_file}:{line}: {video} frame {frame} where {expected} was expected; "
                        "list each video's frames once, in order, from 0"
                    )
            labels = np.asarray([index[label] for _, _, label in rows], dtype=np.int64)
            source = self._source(video)
            folder_fps = self.folder_fps if source.is_dir() else None
            records.append(VideoRecord(video, source, labels, self.native_fps, folder_fps))
        return records

    def _source(self, video: str) -> Path:
        folder = self.root / self.video_dir
        source = find_source(video, [folder])
        if source is None:
            raise DataError(
                f"{folder / (video + '.mp4')}: video {video} of {self.labels_file.name} is missing"
            )
        return source

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        if not self._split_of:
            return {"train": list(names)}
        return {s: [n for n in names if self._split_of.get(n) == s] for s in SPLIT_NAMES}
