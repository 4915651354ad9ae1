"""M2CAI16 workflow: 27 train + 14 test videos with one annotation row per video frame.

Each annotation file has one header line (its text varies, so any is accepted), then `<frame>\t<phase>` rows,
one per frame of the video. Rows map to time with each video's own frame rate, read from the video file: the
material includes EndoVis-2015 videos described as 24-25 fps, so a fixed 25 would drift. Videos and their
annotations sit side by side, train ones in `train_dataset/`, test ones in `test_dataset/` (a flat copy is
read too: the `test_` prefix tells the split). The file names below are the one place to change the layout.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from plstitch_eval.data.datasets.annotations import read_phase_tsv
from plstitch_eval.data.datasets.base import DatasetAdapter, VideoRecord, find_source
from plstitch_eval.data.datasets.registry import register_dataset
from plstitch_eval.data.video import probe
from plstitch_eval.errors import DataError

M2CAI16_PHASES = [
    "TrocarPlacement",
    "Preparation",
    "CalotTriangleDissection",
    "ClippingCutting",
    "GallbladderDissection",
    "GallbladderPackaging",
    "CleaningCoagulation",
    "GallbladderRetraction",
]
TRAIN_DIR = "train_dataset"
TEST_DIR = "test_dataset"
# annotation file name -> video name; test videos carry a "test_" prefix in the official release
ANNOTATION_PATTERN = re.compile(r"^(?P<name>(?:test_)?workflow_video_\d+)\.txt$")


@register_dataset("m2cai16")
class M2CAI16(DatasetAdapter):
    """M2CAI16 workflow challenge; 1 fps evaluation; official split 27 train / 14 test."""

    name = "m2cai16"
    display_name = "M2CAI16"
    class_names = M2CAI16_PHASES
    native_fps = 25.0
    default_eval_fps = 1.0
    split_schemes = ("27-14",)

    def __init__(self, root: str | os.PathLike, fps: float | None = None) -> None:
        super().__init__(root, fps)
        self._split_of: dict[str, str] = {}

    def _load(self) -> list[VideoRecord]:
        folders = [(self.root / TRAIN_DIR, "train"), (self.root / TEST_DIR, "test")]
        if not any(folder.is_dir() for folder, _ in folders):
            folders = [(self.root, None)]  # flat copy: the "test_" prefix tells the split
        class_index = self.class_index()
        records = []
        for folder, split in folders:
            if not folder.is_dir():
                continue
            for ann in sorted(folder.iterdir()):
                match = ANNOTATION_PATTERN.match(ann.name)
                if not match:
                    continue
                name = match["name"]
                self._split_of[name] = split or ("test" if name.startswith("test_") else "train")
                labels = read_phase_tsv(ann, class_index, header=None)
                source = self._source(folder, name)
                records.append(VideoRecord(name, source, labels, self._frame_rate(source)))
        if not records:
            raise DataError(
                f"{self.root}: no M2CAI16 annotation files (e.g. {TRAIN_DIR}/workflow_video_01.txt) found"
            )
        return records

    @staticmethod
    def _source(folder: Path, name: str) -> Path:
        source = find_source(name, [folder, folder / "videos"])
        if source is None:
            raise DataError(
                f"{folder / (name + '.mp4')}: video for {name} is missing; add it beside its annotation"
            )
        return source

    @staticmethod
    def _frame_rate(source: Path) -> float:
        """The video's own frame rate (its annotation has one row per frame), from the container."""
        rate = probe(source).fps
        if not rate > 0:
            raise DataError(f"{source}: the container states no frame rate; re-mux the video with its fps")
        return rate

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return {split: [n for n in names if self._split_of.get(n) == split] for split in ("train", "test")}
