"""JIGSAWS (JHU-ISI Gesture and Skill Assessment Working Set): da Vinci trials of suturing, knot tying and
needle passing, one skill rating per trial (GRS and six items), no per-frame classes; videos at 30 fps.

Layout (the release's readme and its meta files)::

    <root>/Suturing/video/Suturing_B001_capture1.avi, ..._capture2.avi     left / right camera, 30 fps
    <root>/Suturing/meta_file_Suturing.txt    per trial, tab-separated: name, (empty), self-proclaimed skill
                                              N/I/E, GRS, (empty), the six modified-OSATS items (1-5 each)
    <root>/Knot_Tying/..., <root>/Needle_Passing/...   the same for the other two tasks

Trials are named ``<Task>_<user B-I><trial 001-005>``. Each trial is one video (``capture`` 1 or 2);
`VideoRecord.skill` holds its GRS (``grs``, 6-30) and the six items, `skill_level` its N/I/E. There are no
per-frame classes (every frame is -1). Split schemes follow the Experimental_setup: ``loso-1`` ... ``loso-5``
hold out one supertrial (every user's trial k), ``louo-B`` ... ``louo-I`` one user.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets.annotations import read_lines
from plstitch_eval.data.datasets.base import DatasetAdapter, VideoRecord
from plstitch_eval.data.datasets.registry import register_dataset
from plstitch_eval.errors import ConfigError, DataError

TASKS = ("Suturing", "Knot_Tying", "Needle_Passing")
ITEMS = (
    "respect_for_tissue",
    "suture_needle_handling",
    "time_and_motion",
    "flow_of_operation",
    "overall_performance",
    "quality_of_final_product",
)
META_FILE = "meta_file_{}.txt"
VIDEO_FILE = "{}_capture{}.avi"
LEVELS = ("N", "I", "E")  # novice, intermediate, expert (self-proclaimed)
FPS = 30.0
USERS = "BCDEFGHI"
LAYOUT = (
    "<Task>/video/<Task>_<user><trial>_capture1.avi and <Task>/meta_file_<Task>.txt for Task in "
    "Suturing, Knot_Tying, Needle_Passing"
)


def read_meta_file(path: Path) -> dict[str, tuple[str, dict[str, float]]]:
    """{trial: (skill level, {"grs": ..., six items ...})} of one `meta_file_<Task>.txt`."""
    if not path.is_file():
        raise DataError(f"{path}: meta file is missing; JIGSAWS layout: {LAYOUT}")
    out = {}
    for n, line in enumerate(read_lines(path), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3 + len(ITEMS) or parts[1] not in LEVELS:
            raise DataError(
                f"{path}:{n}: expected '<trial> <N|I|E> <GRS> <six item scores>' (tab-separated), got "
                f"'{line.strip()}'"
            )
        try:
            values = [float(v) for v in parts[2:]]
        except ValueError:
            raise DataError(
                f"{path}:{n}: GRS and item scores must be numbers, got '{line.strip()}'"
            ) from None
        out[parts[0]] = (parts[1], dict(zip(("grs", *ITEMS), values, strict=True)))
    if not out:
        raise DataError(f"{path}: lists no trials")
    return out


@register_dataset("jigsaws")
class Jigsaws(DatasetAdapter):
    """JIGSAWS skill (GRS 6-30 and six OSATS items per trial); 30 fps videos; LOSO and LOUO folds."""

    name = "jigsaws"
    display_name = "JIGSAWS"
    family = "surgical"
    class_names: list[str] = []  # no per-frame classes here: the skill is `VideoRecord.skill`
    skill_names = ("grs", *ITEMS)
    native_fps = FPS
    default_eval_fps = 1.0
    split_schemes = (*(f"loso-{k}" for k in range(1, 6)), *(f"louo-{u}" for u in USERS))
    license = "unknown"  # the release's own terms are given with the download form; no source we read says
    license_source = ""

    def __init__(
        self, root: str | os.PathLike, fps: float | None = None, task: str = "suturing", capture: int = 1
    ) -> None:
        super().__init__(root, fps)
        by_key = {t.lower(): t for t in TASKS}
        wanted = task.lower().replace("-", "_")
        if wanted != "all" and wanted not in by_key:
            raise ConfigError(f"unknown JIGSAWS task '{task}'; use one of {', '.join(by_key)} or all")
        if capture not in (1, 2):
            raise ConfigError(f"capture must be 1 (left camera) or 2 (right), got {capture}")
        self.tasks = TASKS if wanted == "all" else (by_key[wanted],)
        self.capture = capture

    def _load(self) -> list[VideoRecord]:
        from plstitch_eval.data.video import probe

        records = []
        for task in self.tasks:
            for trial, (level, scores) in read_meta_file(self.root / task / META_FILE.format(task)).items():
                source = self.root / task / "video" / VIDEO_FILE.format(trial, self.capture)
                if not source.is_file():
                    raise DataError(f"{source}: video of {trial} is missing; JIGSAWS layout: {LAYOUT}")
                n_frames = probe(source).n_frames
                labels = np.full(n_frames, -1, dtype=np.int64)
                records.append(VideoRecord(trial, source, labels, FPS, skill=scores, skill_level=level))
        return records

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        from plstitch_eval.metrics.skill import loso_folds, louo_folds

        folds = loso_folds(names) if scheme.startswith("loso") else louo_folds(names)
        chosen = next((f for f in folds if f["name"] == scheme), None)
        if chosen is None:  # no trial of this supertrial / user in this copy: nothing to test
            return {"train": list(names), "val": [], "test": []}
        return {split: chosen[split] for split in ("train", "val", "test")}
