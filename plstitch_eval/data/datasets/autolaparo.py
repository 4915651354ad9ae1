"""AutoLaparo task 1 (phase): `frames/NN/XXXX.jpg` at 1 fps (1-indexed) + `labels/label_NN.txt`.

Label files hold a header line, then `<frame index> <phase id>` rows. Whether phase ids are 0- or 1-based is
*unverified*; `label_base="auto"` (the default) detects it over all files in `resolve_label_base`.
"""

from __future__ import annotations

import os

import numpy as np

from plstitch_eval.data.datasets.annotations import read_index_label_table
from plstitch_eval.data.datasets.base import DatasetAdapter, VideoRecord, by_number
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
DEFAULT_LABEL_BASE = 1  # used when the ids seen fit both conventions


def resolve_label_base(all_ids: list[np.ndarray], n_classes: int, label_base: int | str) -> int:
    """0 or 1: the configured base, or detected (a 0 means 0-based; an id equal to n_classes means 1-based)."""
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
    """AutoLaparo hysterectomy phases; frames at 1 fps; split 1-10 train, 11-14 val, 15-21 test."""

    name = "autolaparo"
    class_names = AUTOLAPARO_PHASES
    native_fps = 1.0
    default_eval_fps = 1.0
    split_schemes = ("10-4-7",)

    def __init__(
        self, root: str | os.PathLike, fps: float | None = None, label_base: int | str = "auto"
    ) -> None:
        super().__init__(root, fps)
        self.label_base = label_base

    def _load(self) -> list[VideoRecord]:
        frames_root, labels_root = self.root / FRAMES_DIR, self.root / LABELS_DIR
        for folder in (frames_root, labels_root):
            if not folder.is_dir():
                raise DataError(
                    f"{folder}: missing; AutoLaparo needs {FRAMES_DIR}/NN/ and {LABELS_DIR}/label_NN.txt"
                )
        tables = {}
        for folder in sorted(p for p in frames_root.iterdir() if p.is_dir()):
            label_file = labels_root / LABEL_FILE.format(folder.name)
            if not label_file.is_file():
                raise DataError(f"{label_file}: label file for frames/{folder.name}/ is missing")
            tables[folder.name] = (label_file, *read_index_label_table(label_file))
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
            records.append(VideoRecord(name, frames_root / name, labels, self.native_fps, folder_fps=1.0))
        return records

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return by_number(names, train=(1, 10), val=(11, 14), test=(15, 21))
