"""Cholec80: `videos/videoNN.mp4` (25 fps) + `phase_annotations/videoNN-phase.txt` (`Frame<TAB>Phase`), and
when present `tool_annotations/videoNN-tool.txt` (seven instruments, 0/1, one row every 25 frames)."""

from __future__ import annotations

import os
from pathlib import Path

from plstitch_eval.data.datasets.annotations import read_phase_tsv, read_tool_tsv
from plstitch_eval.data.datasets.base import DatasetAdapter, VideoRecord, by_number, find_source
from plstitch_eval.data.datasets.registry import register_dataset
from plstitch_eval.errors import DataError

CHOLEC80_PHASES = [
    "Preparation",
    "CalotTriangleDissection",
    "ClippingCutting",
    "GallbladderDissection",
    "GallbladderPackaging",
    "CleaningCoagulation",
    "GallbladderRetraction",
]
CHOLEC80_TOOLS = ["Grasper", "Bipolar", "Hook", "Scissors", "Clipper", "Irrigator", "SpecimenBag"]
ANNOTATION_DIR = "phase_annotations"
ANNOTATION_SUFFIX = "-phase.txt"
TOOL_DIR = "tool_annotations"
TOOL_SUFFIX = "-tool.txt"


@register_dataset("cholec80")
class Cholec80(DatasetAdapter):
    """Cholec80 phase recognition; 1 fps evaluation; splits 40/40 (default), 32/8/40 and 40/8/32."""

    name = "cholec80"
    display_name = "Cholec80"
    class_names = CHOLEC80_PHASES
    tool_names = CHOLEC80_TOOLS
    native_fps = 25.0
    default_eval_fps = 1.0
    split_schemes = ("40-40", "32-8-40", "40-8-32")
    license = "CC-BY-NC-SA-4.0"
    license_source = "CAMMA's Cholec80 terms (camma.u-strasbg.fr/datasets): non-commercial, share-alike"

    def __init__(self, root: str | os.PathLike, fps: float | None = None, video_dir: str = "videos") -> None:
        super().__init__(root, fps)
        self.video_dir = video_dir

    def _load(self) -> list[VideoRecord]:
        ann_dir = self.root / ANNOTATION_DIR
        if not ann_dir.is_dir():
            raise DataError(
                f"{ann_dir}: folder of phase annotations is missing; is --root the {self.name} folder?"
            )
        class_index = self.class_index()
        records = []
        for ann in sorted(ann_dir.glob(f"*{ANNOTATION_SUFFIX}")):
            stem = ann.name[: -len(ANNOTATION_SUFFIX)]
            record = VideoRecord(stem, self._source(stem), read_phase_tsv(ann, class_index), self.native_fps)
            tool_file = self.root / TOOL_DIR / f"{stem}{TOOL_SUFFIX}"
            if tool_file.is_file():  # tool presence is optional: phase-only copies of Cholec80 are common
                frames, record.tools = read_tool_tsv(tool_file, self.tool_names)
                record.tool_times = frames / self.native_fps
            records.append(record)
        return records

    def _source(self, stem: str) -> Path:
        folder = self.root / self.video_dir
        source = find_source(stem, [folder])
        if source is None:
            raise DataError(
                f"{folder / (stem + '.mp4')}: video for {stem} is missing (looked for {stem}.* and "
                f"{stem}/ in {folder}); add it or point --video-dir at the folder of videos"
            )
        return source

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        if scheme == "32-8-40":
            return by_number(names, train=(1, 32), val=(33, 40), test=(41, 80))
        if scheme == "40-8-32":
            return by_number(names, train=(1, 40), val=(41, 48), test=(49, 80))
        return by_number(names, train=(1, 40), test=(41, 80))
