"""AutoLaparo task 1 (phase): the release's 21 videos `videos/NN.mp4` (25 fps) and `labels/label_NN.txt`.

Label files hold a header line, then `<frame index> <phase id>` rows, one per second. Phase ids are 1-based
(1-7, as the project page and README list them); `label_base=0` reads 0-based copies and `"auto"` detects the
base over all files (`resolve_label_base`). Frame folders `frames/NN/XXXX.jpg` at 1 fps (frames a user
extracted, as several public loaders expect) are read instead of the video when present.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets.annotations import read_index_label_table
from plstitch_eval.data.datasets.base import DatasetAdapter, VideoRecord, by_number, find_source
from plstitch_eval.data.datasets.registry import register_dataset
from plstitch_eval.errors import ConfigError, DataError

AUTOLAPARO_PHASES = [
    "Preparation",
    "Dividing Ligament and Peritoneum",
    "Dividing Uterine Vessels and Ligament",
    "Transecting the Vagina",
    "Specimen Removal",
    "Suturing",
    "Washing",
]
FRAMES_DIR = "frames"
LABELS_DIR = "labels"
LABEL_FILE = "label_{}.txt"
LABEL_PATTERN = re.compile(r"^label_(?P<name>\d+)\.txt$")
LABEL_FPS = 1.0  # one label per second
FRAMES_FPS = 1.0  # the released frame folders hold one frame per second
DEFAULT_LABEL_BASE = 1  # the release's ids are 1-7; also "auto"'s answer when ids fit both conventions


def resolve_label_base(all_ids: list[np.ndarray], n_classes: int, label_base: int | str) -> int:
    """0 or 1: the configured base, or detected (an id 0 means 0-based; an id n_classes means 1-based)."""
    if label_base in (0, 1):
        return int(label_base)
    if label_base != "auto":
        raise ConfigError(f"label_base must be 0, 1 or 'auto', got {label_base!r}")
    ids = np.concatenate(all_ids) if all_ids else np.zeros(0, dtype=np.int64)
    has_zero, has_top = bool((ids == 0).any()), bool((ids == n_classes).any())
    if has_zero and has_top:
        raise DataError(
            f"phase ids span 0..{n_classes}, more than {n_classes} phases; set label_base explicitly"
        )
    if has_zero:
        return 0
    if has_top:
        return 1
    return DEFAULT_LABEL_BASE


@register_dataset("autolaparo")
class AutoLaparo(DatasetAdapter):
    """AutoLaparo hysterectomy phases; labels at 1 fps; split 1-10 train, 11-14 val, 15-21 test."""

    name = "autolaparo"
    display_name = "AutoLaparo"
    class_names = AUTOLAPARO_PHASES
    native_fps = 1.0  # of the labels (and of user-extracted frame folders); the released videos are 25 fps
    default_eval_fps = 1.0
    split_schemes = ("10-4-7",)

    def __init__(
        self,
        root: str | os.PathLike,
        fps: float | None = None,
        label_base: int | str = DEFAULT_LABEL_BASE,
        video_dir: str = "videos",
    ) -> None:
        super().__init__(root, fps)
        self.label_base, self.video_dir = label_base, video_dir

    def _load(self) -> list[VideoRecord]:
        labels_root = self.root / LABELS_DIR
        if not labels_root.is_dir():
            raise DataError(
                f"{labels_root}: missing; AutoLaparo needs {LABELS_DIR}/{LABEL_FILE.format('NN')}"
            )
        tables = {}
        for label_file in sorted(labels_root.iterdir()):
            match = LABEL_PATTERN.match(label_file.name)
            if match:
                tables[match["name"]] = (label_file, *read_index_label_table(label_file))
        base = resolve_label_base(
            [ids for _, _, ids in tables.values()], len(self.class_names), self.label_base
        )
        records = []
        for name, (label_file, _frames, ids) in tables.items():
            labels = ids - base
            bad = np.flatnonzero((labels < 0) | (labels >= len(self.class_names)))
            if len(bad):
                raise DataError(
                    f"{label_file}:{int(bad[0]) + 2}: phase id {int(ids[bad[0]])} is outside "
                    f"{base}..{base + len(self.class_names) - 1}; check the file or label_base"
                )
            source = self._source(name)
            folder_fps = FRAMES_FPS if source.is_dir() else None
            records.append(VideoRecord(name, source, labels, LABEL_FPS, folder_fps))
        return records

    def _source(self, name: str) -> Path:
        frames, videos = self.root / FRAMES_DIR, self.root / self.video_dir
        source = find_source(name, [frames, videos])
        if source is None:
            raise DataError(
                f"{frames / name}: frames (or {videos / name}.mp4) of video {name} are missing; "
                "add them or set video_dir"
            )
        return source

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return by_number(names, train=(1, 10), val=(11, 14), test=(15, 21))
