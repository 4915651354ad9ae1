"""Endoscapes2023's CVS subset (Endoscapes-CVS201) in CAMMA's released layout: critical view of safety
(C1-C3, three raters' mean) on frames one every 5 s, no phase classes; frames at 1 fps.

Layout (CAMMA-public/Endoscapes README, "File Structure")::

    <root>/train/1_29375.jpg ...              <video id>_<frame number>.jpg: every frame of the CVS region of
                                              interest at 1 fps (frame numbers of the 25 fps video, step 25)
    <root>/train/annotation_ds_coco.json      COCO images of the CVS-annotated frames (about one every 5 s):
                                              "file_name", "is_ds_keyframe", "ds": [C1, C2, C3] = the mean
                                              of the three raters' 0/1 votes (0, 1/3, 2/3 or 1)
    <root>/val/..., <root>/test/...           the same for the validation and test videos
    <root>/train_vids.txt, val_vids.txt, test_vids.txt   the official split: 120 / 41 / 40 video ids

A video's frames are read as a frame folder at 1 fps (a folder of links to its files, in the plstitch
cache), its time 0 at its first frame; the raters' means are `VideoRecord.cvs` at their frames' times.
There are no phase labels (every frame's class is -1). Splits: the official one (`*_vids.txt`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets.annotations import read_lines
from plstitch_eval.data.datasets.base import SPLIT_NAMES, DatasetAdapter, VideoRecord, natural_key
from plstitch_eval.data.datasets.registry import register_dataset
from plstitch_eval.errors import DataError

ANNOTATION_FILE = "annotation_ds_coco.json"
SPLIT_FILE = "{}_vids.txt"
FRAME_NAME = re.compile(r"^(?P<video>\d+)_(?P<frame>\d+)\.jpg$")
FRAME_FILE = "{}_{}.jpg"
SOURCE_FPS = 25  # frame numbers count the 25 fps source video
FRAME_STEP = 25  # released frames: one a second
CRITERIA = ("C1", "C2", "C3")
LAYOUT = (
    "train|val|test/<video>_<frame>.jpg (1 fps, frame numbers step 25), "
    "train|val|test/annotation_ds_coco.json and train_vids.txt, val_vids.txt, test_vids.txt"
)


def read_video_ids(path: Path) -> list[str]:
    """Video ids of a `*_vids.txt` split file (numbers separated by lines, spaces or commas)."""
    if not path.is_file():
        raise DataError(f"{path}: split file is missing; Endoscapes layout: {LAYOUT}")
    ids = []
    for n, line in enumerate(read_lines(path), start=1):
        for token in re.split(r"[\s,]+", line.strip()):
            if not token:
                continue
            try:
                ids.append(str(int(float(token))))
            except ValueError:
                raise DataError(f"{path}:{n}: expected video ids (numbers), got '{token}'") from None
    return ids


def read_cvs_annotations(path: Path) -> dict[str, dict[int, np.ndarray]]:
    """{video id: {frame number: [C1, C2, C3] raters' mean}} of one `annotation_ds_coco.json` (its images
    with ``is_ds_keyframe`` true, or without that tag)."""
    if not path.is_file():
        raise DataError(f"{path}: CVS annotation file is missing; Endoscapes layout: {LAYOUT}")
    try:
        images = json.loads(path.read_text(encoding="utf-8"))["images"]
        rows = [(Path(str(im["file_name"])).name, im.get("is_ds_keyframe", True), im["ds"]) for im in images]
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); download the file again") from None
    except (KeyError, TypeError, AttributeError):
        raise DataError(
            f'{path}: expected COCO {{"images": [{{"file_name": ..., "ds": [C1, C2, C3]}}, ...]}}; '
            "is it Endoscapes' annotation_ds_coco.json?"
        ) from None
    out: dict[str, dict[int, np.ndarray]] = {}
    for name, keyframe, ds in rows:
        found = FRAME_NAME.match(name)
        if not found:
            raise DataError(f"{path}: image '{name}' is not named <video>_<frame>.jpg")
        values = np.asarray(ds, dtype=np.float64) if isinstance(ds, list) else np.array([])
        if values.shape != (3,) or not ((values >= 0) & (values <= 1)).all():
            raise DataError(f"{path}: image '{name}': 'ds' must be three raters' means in [0, 1], got {ds!r}")
        if keyframe:
            out.setdefault(found["video"], {})[int(found["frame"])] = values
    return out


def frames_on_disk(folder: Path) -> dict[str, list[int]]:
    """{video id: sorted frame numbers} of the `<video>_<frame>.jpg` files in a split folder."""
    frames: dict[str, list[int]] = {}
    for entry in os.scandir(folder):
        found = FRAME_NAME.match(entry.name)
        if found:
            frames.setdefault(found["video"], []).append(int(found["frame"]))
    return {video: sorted(numbers) for video, numbers in frames.items()}


def first_gap(frames: list[int], annotated: list[int]) -> int | None:
    """The first frame number missing from `frames`: a step-25 gap, or an annotated frame outside them."""
    present = set(frames)
    expected = range(frames[0], frames[-1] + 1, FRAME_STEP) if frames else range(0)
    missing = [f for f in expected if f not in present] + [f for f in annotated if f not in present]
    return min(missing) if missing else None


def frame_view(split_folder: Path, video: str, frames: list[int]) -> Path:
    """A frame folder of links to one video's frames, numbered in time order, in the plstitch cache (made in
    a temporary folder, then renamed; kept while its files are unchanged)."""
    from plstitch_eval.data.synthetic import cache_root

    targets = [str((split_folder / FRAME_FILE.format(video, f)).resolve()) for f in frames]
    digest = hashlib.sha1("\n".join(targets).encode()).hexdigest()[:16]
    view = cache_root() / "endoscapes-frames" / f"{video}-{digest}"
    if view.is_dir():
        return view
    view.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{video}-", dir=view.parent))
    try:
        for i, target in enumerate(targets):
            os.symlink(target, building / f"{i:06d}.jpg")
        os.rename(building, view)
    except OSError as exc:
        shutil.rmtree(building, ignore_errors=True)
        if not view.is_dir():  # another process may have made the same view meanwhile
            raise DataError(f"{view}: cannot make the frame folder of video {video} ({exc})") from exc
    return view


@register_dataset("endoscapes")
class Endoscapes(DatasetAdapter):
    """Endoscapes2023 CVS (C1-C3, three raters' mean) on frames one every 5 s; 1 fps; official split."""

    name = "endoscapes"
    display_name = "Endoscapes2023"
    family = "surgical"
    class_names: list[str] = []  # no phases: CVS is `VideoRecord.cvs`
    cvs_names = list(CRITERIA)
    native_fps = 1.0  # of the released frames (the source videos are 25 fps)
    default_eval_fps = 1.0
    split_schemes = ("official",)
    license = "CC-BY-NC-SA-4.0"
    license_source = "CAMMA-public/Endoscapes README (LICENSE): CC BY-NC-SA 4.0, non-commercial research"

    def _official(self) -> dict[str, list[str]]:
        return {split: read_video_ids(self.root / SPLIT_FILE.format(split)) for split in SPLIT_NAMES}

    def _load(self) -> list[VideoRecord]:
        records = []
        for split, videos in self._official().items():
            folder = self.root / split
            if not folder.is_dir():
                raise DataError(f"{folder}: missing; Endoscapes layout: {LAYOUT}")
            annotations = read_cvs_annotations(folder / ANNOTATION_FILE)
            on_disk = frames_on_disk(folder)
            for video in videos:
                records.append(
                    self._record(folder, video, on_disk.get(video, []), annotations.get(video, {}))
                )
        return records

    def _record(self, folder: Path, video: str, frames: list[int], cvs: dict[int, np.ndarray]) -> VideoRecord:
        if not frames:
            raise DataError(
                f"{folder / FRAME_FILE.format(video, '<frame>')}: no frames of video {video} (listed in "
                f"{SPLIT_FILE.format(folder.name)}); Endoscapes layout: {LAYOUT}"
            )
        gap = first_gap(frames, sorted(cvs))
        if gap is not None:
            raise DataError(
                f"{folder / FRAME_FILE.format(video, gap)}: frame missing (video {video} has frames "
                f"{frames[0]}-{frames[-1]}, one every {FRAME_STEP}); layout: {LAYOUT}"
            )
        annotated = sorted(cvs)
        return VideoRecord(
            video,
            frame_view(folder, video, frames),
            np.full(len(frames), -1, dtype=np.int64),
            1.0,
            folder_fps=1.0,
            cvs=np.stack([cvs[f] for f in annotated]) if annotated else np.zeros((0, 3)),
            cvs_times=(np.asarray(annotated, dtype=np.float64) - frames[0]) / SOURCE_FPS,
        )

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return {split: sorted(ids, key=natural_key) for split, ids in self._official().items()}
