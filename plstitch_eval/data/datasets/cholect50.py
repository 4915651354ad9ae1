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
CholecT45 is read from a CholecT50 copy too: only its 45 videos are listed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

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
                raise DataError(f"{folder}: missing; {self.display_name} layout: {LAYOUT}")
        labelled = {p.stem for p in labels_dir.glob("VID*.json")}
        names = self._wanted(sorted(labelled | {p.name for p in frames_dir.glob("VID*") if p.is_dir()}))
        records = []
        for name in names:
            frame_ids, phases, triplets, tools = read_label_json(labels_dir / f"{name}.json")
            source = frames_dir / name
            if not source.is_dir():
                raise DataError(f"{source}: frame folder of {name} is missing; layout: {LAYOUT}")
            present = {p.name for p in source.iterdir()}
            missing = next(
                (FRAME_FILE.format(i) for i in frame_ids if FRAME_FILE.format(i) not in present), None
            )
            if missing is not None:
                raise DataError(
                    f"{source / missing}: frame missing ({len(frame_ids)} annotated frames); layout: {LAYOUT}"
                )
            times = frame_ids / FPS
            records.append(
                VideoRecord(
                    name,
                    source,
                    phases,
                    FPS,
                    folder_fps=FPS,
                    tools=tools,
                    tool_times=times,
                    triplets=triplets,
                    triplet_times=times,
                )
            )
        return records


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
    """CholecT45 (CholecT50's 45 Cholec80 videos) triplets and phases; 1 fps; the official 5 CV folds."""

    name = "cholect45"
    display_name = "CholecT45"
    split_schemes = tuple(f"crossval-{k}" for k in range(1, 6))
    folds = CHOLECT45_FOLDS

    def _wanted(self, names: list[str]) -> list[str]:
        members = {video_name(v) for fold in self.folds for v in fold}
        return [n for n in names if n in members]

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return crossval_split(self.folds, int(scheme.rsplit("-", 1)[1]))
