"""MS-TCN layout of GTEA and Breakfast: `groundTruth/<video>.txt`, `splits/*.splitN.bundle`, `mapping.txt`.

Raw videos come separately: `<video_dir>/<video>.mp4` (any common extension) or a frame folder
`<frames_dir>/<video>/` read at `native_fps`.
"""

from __future__ import annotations

import os

from plstitch_eval.data.datasets.annotations import read_bundle, read_ground_truth, read_mapping
from plstitch_eval.data.datasets.base import DatasetAdapter, VideoRecord, find_source
from plstitch_eval.errors import DataError

GROUND_TRUTH_DIR = "groundTruth"
SPLITS_DIR = "splits"
MAPPING_FILE = "mapping.txt"
BUNDLE_FILE = "{split}.split{n}.bundle"


class MsTcnDataset(DatasetAdapter):
    """Adapter for datasets distributed in the MS-TCN layout; class names come from `mapping.txt`."""

    family = "cooking"
    native_fps = 15.0
    default_eval_fps = 15.0
    split_schemes = ("split1", "split2", "split3", "split4")

    def __init__(
        self,
        root: str | os.PathLike,
        fps: float | None = None,
        video_dir: str = "videos",
        frames_dir: str = "frames",
    ) -> None:
        super().__init__(root, fps)
        self.video_dir, self.frames_dir = video_dir, frames_dir
        self.class_names = read_mapping(self.root / MAPPING_FILE)

    def _load(self) -> list[VideoRecord]:
        gt_dir = self.root / GROUND_TRUTH_DIR
        if not gt_dir.is_dir():
            raise DataError(
                f"{gt_dir}: folder of per-frame labels is missing; is --root the {self.name} folder?"
            )
        class_index = self.class_index()
        records = []
        for gt in sorted(gt_dir.glob("*.txt")):
            source, folder_fps = self._source(gt.stem)
            records.append(
                VideoRecord(gt.stem, source, read_ground_truth(gt, class_index), self.native_fps, folder_fps)
            )
        return records

    def _source(self, stem: str) -> tuple[os.PathLike, float | None]:
        videos, frames = self.root / self.video_dir, self.root / self.frames_dir
        source = find_source(stem, [videos]) or find_source(stem, [frames])
        if source is None:
            raise DataError(
                f"{videos / (stem + '.mp4')}: raw video for {stem} is missing (also looked for "
                f"{frames / stem}/); add the videos or frames, or set --video-dir / frames_dir"
            )
        return source, (self.native_fps if source.is_dir() else None)

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        n = scheme.removeprefix("split")
        present = set(names)
        splits = {}
        for split in ("train", "test"):
            bundle = self.root / SPLITS_DIR / BUNDLE_FILE.format(split=split, n=n)
            entries = read_bundle(bundle)
            for line, name in entries:
                if name not in present:
                    raise DataError(
                        f"{bundle}:{line}: video '{name}' has no {GROUND_TRUTH_DIR}/{name}.txt; "
                        "fix the bundle or add the ground truth"
                    )
            splits[split] = [name for _, name in entries]
        return splits
