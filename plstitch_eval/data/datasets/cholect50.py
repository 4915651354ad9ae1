"""CholecT50 and CholecT45 (action triplets + phases) in CAMMA's released layout, frames and labels at 1 fps.

Layout (CAMMA-public/cholect50, docs/README-Format.md)::

    <root>/videos/VID01/000000.png, 000001.png, ...   frames extracted at 1 fps, numbered from 0, 6 digits
    <root>/labels/VID01.json                            {"annotations": {"<frame>": [[15 numbers], ...]}, ...}

Each row of a frame is one triplet instance: 0 triplet id, 1 instrument id, 2-6 its score and box, 7 verb id,
8 target id, 9-13 its score and box, 14 phase id; -1 = none (CAMMA's `dataloader_pth.py` reads the same
columns). A frame's phase is the same on all its rows; a frame with no row, or only -1 phases, is unlabelled
(-1). Frames are exposed as a frame folder at 1 fps, phases as the class labels, the 100-triplet multi-hot
as `VideoRecord.triplets` and instrument presence (the instrument column) as `VideoRecord.tools`.

Splits: the official ones of `dataloader_pth.py` (Nwoye & Padoy 2022, arXiv:2204.05235): CholecT50's challenge
split (CholecTriplet 2021/2022), its original Rendezvous split and 5 cross-validation folds; CholecT45's 5
folds (CholecT50's without their last video). In fold k the test videos are fold k; the other folds, in fold
order, give the validation videos (their last 5) and the training videos (the rest), as that loader does.
CholecT45 is read from a CholecT50 copy (only its 45 videos are listed) or from its own release
(CAMMA-public/cholect45: data/VIDxx/000000.png, triplet/VIDxx.txt, instrument/VIDxx.txt, dict/; parsed by
`cholect45_release.py`), detected at the root. The release has no phase labels: every frame's phase is -1 and
the adapter's `class_names` is empty, so phase tasks see no phases; its dict/triplet.txt and instrument.txt
must list our vocabulary in our order (ivtmetrics' component maps rely on it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets import cholect45_release as release
from plstitch_eval.data.datasets.base import DatasetAdapter, VideoRecord
from plstitch_eval.data.datasets.cholect50_vocab import INSTRUMENTS, PHASES, TRIPLET_NAMES
from plstitch_eval.data.datasets.registry import register_dataset
from plstitch_eval.errors import DataError

FRAMES_DIR = "videos"
LABELS_DIR = "labels"
FRAME_FILE = "{:06d}.png"
FPS = 1.0  # frames and labels: one per second
LAYOUT = "videos/VIDxx/000000.png ... and labels/VIDxx.json, one frame folder and label file per video"
TRIPLET_COL, INSTRUMENT_COL, PHASE_COL, ROW_LENGTH = 0, 1, 14, 15

# dataloader_pth.py's split_selector (CAMMA-public/cholect50): video numbers, VIDxx with two digits or more
CHOLECT50_FOLDS = (
    (79, 2, 51, 6, 25, 14, 66, 23, 50, 111),
    (80, 32, 5, 15, 40, 47, 26, 48, 70, 96),
    (31, 57, 36, 18, 52, 68, 10, 8, 73, 103),
    (42, 29, 60, 27, 65, 75, 22, 49, 12, 110),
    (78, 43, 62, 35, 74, 1, 56, 4, 13, 92),
)
CHOLECT45_FOLDS = tuple(fold[:-1] for fold in CHOLECT50_FOLDS)  # README: "remove the last video in each fold"
# fmt: off
CHOLECT50_CHALLENGE = {
    "train": (1, 15, 26, 40, 52, 79, 2, 27, 43, 56, 66, 4, 22, 31, 47, 57, 68, 23, 35, 48,
              60, 70, 13, 25, 49, 62, 75, 8, 12, 29, 50, 78, 6, 51, 10, 73, 14, 32, 80, 42),
    "val": (5, 18, 36, 65, 74),
    "test": (92, 96, 103, 110, 111),
}
CHOLECT50_RENDEZVOUS = {
    "train": (1, 15, 26, 40, 52, 65, 79, 2, 18, 27, 43, 56, 66, 92, 4, 22, 31, 47, 57, 68,
              96, 5, 23, 35, 48, 60, 70, 103, 13, 25, 36, 49, 62, 75, 110),
    "val": (8, 12, 29, 50, 78),
    "test": (6, 51, 10, 73, 14, 74, 32, 80, 42, 111),
}
# fmt: on
N_VAL_FROM_TRAIN = 5  # cross-validation: the last 5 training videos validate


def video_name(number: int) -> str:
    """92 -> VID92, 1 -> VID01 (the release's folder and label names)."""
    return f"VID{number:02d}"


def crossval_split(folds: tuple[tuple[int, ...], ...], test_fold: int) -> dict[str, list[str]]:
    """Fold `test_fold` (1-based) as test; the others in fold order: the last 5 validate, the rest train."""
    rest = [v for k, fold in enumerate(folds, 1) if k != test_fold for v in fold]
    return {
        "train": [video_name(v) for v in rest[:-N_VAL_FROM_TRAIN]],
        "val": [video_name(v) for v in rest[-N_VAL_FROM_TRAIN:]],
        "test": [video_name(v) for v in folds[test_fold - 1]],
    }


def read_label_json(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(frame ids, phase per frame (-1 unlabelled), triplet multi-hot [N, 100], instrument presence [N, 6]) of
    one label JSON, frames 0..max annotated (a frame missing from the file is unlabelled)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        annotations = data["annotations"]
        rows_of = {int(frame): rows for frame, rows in annotations.items()}
    except FileNotFoundError:
        raise DataError(f"{path}: label file is missing; CholecT50 layout: {LAYOUT}") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); re-extract the labels") from None
    except (KeyError, TypeError, ValueError, AttributeError):
        raise DataError(
            f'{path}: expected {{"annotations": {{"<frame id>": [[15 numbers], ...]}}}}; '
            "is it a CholecT50 label file?"
        ) from None
    n = max(rows_of, default=-1) + 1
    phases = np.full(n, -1, dtype=np.int64)
    triplets = np.zeros((n, len(TRIPLET_NAMES)), dtype=np.int8)
    tools = np.zeros((n, len(INSTRUMENTS)), dtype=np.int8)
    for frame, rows in rows_of.items():
        for row in rows:
            if not isinstance(row, list) or len(row) != ROW_LENGTH:
                raise DataError(
                    f"{path}: frame {frame}: each row must hold {ROW_LENGTH} numbers, got {row!r}"
                )
            triplet, instrument, phase = (int(row[c]) for c in (TRIPLET_COL, INSTRUMENT_COL, PHASE_COL))
            if not (-1 <= triplet < len(TRIPLET_NAMES) and -1 <= instrument < len(INSTRUMENTS)):
                raise DataError(
                    f"{path}: frame {frame}: triplet id {triplet} or instrument id {instrument} unknown"
                )
            if not -1 <= phase < len(PHASES):
                raise DataError(f"{path}: frame {frame}: phase id {phase} is outside 0..{len(PHASES) - 1}")
            if triplet >= 0:
                triplets[frame, triplet] = 1
            if instrument >= 0:
                tools[frame, instrument] = 1
            if phase >= 0:
                phases[frame] = phase
    return np.arange(n), phases, triplets, tools


class _CholecTriplets(DatasetAdapter):
    """Shared reader of CholecT50's release; subclasses name their videos and splits."""

    family = "surgical"
    class_names = list(PHASES)
    tool_names = list(INSTRUMENTS)
    triplet_names = list(TRIPLET_NAMES)
    native_fps = FPS  # of the released frame folders and labels (the source videos are 25 fps)
    default_eval_fps = 1.0
    license = "CC-BY-NC-SA-4.0"
    license_source = "CAMMA-public/cholect50 README (LICENSE): CC BY-NC-SA 4.0, non-commercial, share-alike"
    folds: tuple[tuple[int, ...], ...] = ()

    def _wanted(self, names: list[str]) -> list[str]:
        return names

    def _load(self) -> list[VideoRecord]:
        labels_dir, frames_dir = self.root / LABELS_DIR, self.root / FRAMES_DIR
        for folder in (labels_dir, frames_dir):
            if not folder.is_dir():
                raise DataError(f"{folder}: missing; {self.display_name} layout: {self._layout()}")
        labelled = {p.stem for p in labels_dir.glob("VID*.json")}
        names = self._wanted(sorted(labelled | {p.name for p in frames_dir.glob("VID*") if p.is_dir()}))
        records = []
        for name in names:
            frame_ids, phases, triplets, tools = read_label_json(labels_dir / f"{name}.json")
            source = frame_folder(frames_dir / name, frame_ids, LAYOUT)
            times = frame_ids / FPS
            records.append(triplet_record(name, source, phases, (triplets, times), (tools, times)))
        return records

    def _layout(self) -> str:
        return LAYOUT


def frame_folder(source: Path, frame_ids: np.ndarray, layout: str) -> Path:
    """`source`, a 1 fps frame folder, once every annotated frame's `000000.png` is found there; else the
    one-line error naming the first one missing."""
    if not source.is_dir():
        raise DataError(f"{source}: frame folder of {source.name} is missing; layout: {layout}")
    present = {p.name for p in source.iterdir()}
    missing = next((FRAME_FILE.format(i) for i in frame_ids if FRAME_FILE.format(i) not in present), None)
    if missing is not None:
        raise DataError(
            f"{source / missing}: frame missing ({len(frame_ids)} annotated frames); layout: {layout}"
        )
    return source


def triplet_record(
    name: str,
    source: Path,
    phases: np.ndarray,
    triplets: tuple[np.ndarray, np.ndarray],
    tools: tuple[np.ndarray, np.ndarray],
) -> VideoRecord:
    """A video's record: its frame folder at 1 fps, phases, and (rows, times) of its triplets and tools."""
    return VideoRecord(
        name,
        source,
        phases,
        FPS,
        folder_fps=FPS,
        tools=tools[0],
        tool_times=tools[1],
        triplets=triplets[0],
        triplet_times=triplets[1],
    )


@register_dataset("cholect50")
class CholecT50(_CholecTriplets):
    """CholecT50 action triplets (100: 6 I, 10 V, 15 T) and phases; 1 fps; challenge, rendezvous, CV folds."""

    name = "cholect50"
    display_name = "CholecT50"
    split_schemes = ("challenge", "rendezvous", *(f"crossval-{k}" for k in range(1, 6)))
    folds = CHOLECT50_FOLDS

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        if scheme == "challenge":
            return {s: [video_name(v) for v in vids] for s, vids in CHOLECT50_CHALLENGE.items()}
        if scheme == "rendezvous":
            return {s: [video_name(v) for v in vids] for s, vids in CHOLECT50_RENDEZVOUS.items()}
        return crossval_split(self.folds, int(scheme.rsplit("-", 1)[1]))


@register_dataset("cholect45")
class CholecT45(_CholecTriplets):
    """CholecT45 (CholecT50's 45 Cholec80 videos) triplets, phases (in a CholecT50 copy); 1 fps; CV folds."""

    name = "cholect45"
    display_name = "CholecT45"
    split_schemes = tuple(f"crossval-{k}" for k in range(1, 6))
    folds = CHOLECT45_FOLDS

    def __init__(self, root: str | os.PathLike, fps: float | None = None) -> None:
        super().__init__(root, fps)
        self.layout = "release" if release.is_release(self.root) else "cholect50-copy"
        if self.layout == "release":
            self.class_names = []  # the release has no phase labels: phase tasks see no phases

    def _wanted(self, names: list[str]) -> list[str]:
        members = {video_name(v) for fold in self.folds for v in fold}
        return [n for n in names if n in members]

    def _layout(self) -> str:
        return f"{LAYOUT} (a CholecT50 copy), or its own release: {release.RELEASE_LAYOUT}"

    def _load(self) -> list[VideoRecord]:
        return self._load_release() if self.layout == "release" else super()._load()

    def _load_release(self) -> list[VideoRecord]:
        """Release videos: frames from data/VIDxx, triplets and tools from their txt files; no phases."""
        root = self.root
        for folder in (release.DATA_DIR, release.TRIPLET_DIR, release.INSTRUMENT_DIR, release.DICT_DIR):
            release.required(root / folder, "folder")
        release.check_dict(root / release.DICT_DIR / "triplet.txt", TRIPLET_NAMES)
        release.check_dict(root / release.DICT_DIR / "instrument.txt", INSTRUMENTS)
        frame_dirs = {p.name for p in (root / release.DATA_DIR).glob("VID*") if p.is_dir()}
        labelled = {p.stem for p in (root / release.TRIPLET_DIR).glob("VID*.txt")}
        records = []
        for name in self._wanted(sorted(frame_dirs | labelled)):
            frames, triplets = release.read_label_rows(
                root / release.TRIPLET_DIR / f"{name}.txt", len(TRIPLET_NAMES)
            )
            tool_frames, tools = release.read_label_rows(
                root / release.INSTRUMENT_DIR / f"{name}.txt", len(INSTRUMENTS)
            )
            source = frame_folder(root / release.DATA_DIR / name, frames, release.RELEASE_LAYOUT)
            phases = np.full(int(frames.max(initial=-1)) + 1, -1, dtype=np.int64)
            records.append(
                triplet_record(name, source, phases, (triplets, frames / FPS), (tools, tool_frames / FPS))
            )
        return records

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return crossval_split(self.folds, int(scheme.rsplit("-", 1)[1]))
