"""Training videos: where a run's videos come from (a folder of videos / frame folders, or a dataset's split).

Named apart from evaluation's own (`plstitch_eval.predict.VideoSource`, a video to predict on, and
`plstitch_eval.extract.select_videos`, the records an extraction takes).

`TrainingVideo` is what the frame stores decode (`plstitch_train.data`, `plstitch_train.frames_lmdb`); both
import it from here, so neither imports the other for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.media import VIDEO_EXTENSIONS, is_image_file, is_video_file
from plstitch_eval.errors import ConfigError, DataError

__all__ = ["TrainingVideo", "dataset_videos", "discover_videos", "select_training_videos"]


@dataclass(frozen=True)
class TrainingVideo:
    """A training video: a file or a folder of frames (`folder_fps` = its frame rate, None for files)."""

    name: str
    source: Path
    folder_fps: float | None = None


def discover_videos(folder: str | os.PathLike, folder_fps: float) -> list[TrainingVideo]:
    """Every video file and every folder of images under `folder` (searched recursively)."""
    root = Path(folder)
    if not root.is_dir():
        raise DataError(
            f"--data {root}: not a folder; point it at a folder of videos or frame folders, or a frames LMDB."
        )
    found: list[TrainingVideo] = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and is_video_file(path):
            found.append(TrainingVideo(str(path.relative_to(root).with_suffix("")), path))
        elif path.is_dir() and any(p.is_file() and is_image_file(p) for p in path.iterdir()):
            found.append(TrainingVideo(str(path.relative_to(root)), path, folder_fps))
    if not found:
        raise DataError(
            f"--data {root}: no video files ({', '.join(VIDEO_EXTENSIONS)}) or frame folders found."
        )
    return found


def dataset_videos(name: str, root: str | None, split: str | None) -> list[TrainingVideo]:
    """The videos of a registered dataset's split (same adapters as extraction)."""
    adapter = get_dataset(name, root)
    records = adapter.videos(split)
    if not records:
        raise DataError(f"Dataset {name!r} (root {root}) has no videos in split {split!r}.")
    native_fps = getattr(adapter, "native_fps", None)
    return [
        TrainingVideo(r.name, Path(r.source), native_fps if Path(r.source).is_dir() else None)
        for r in records
    ]


def select_training_videos(
    data: str | os.PathLike | None,
    dataset: str | None,
    root: str | os.PathLike | None,
    split: str | None,
    folder_fps: float,
) -> tuple[list[TrainingVideo], str]:
    """The videos of a folder (`data`) or of a dataset's split, and a line naming where they came from."""
    if (data is None) == (dataset is None):
        raise ConfigError("Give exactly one data source: --data DIR, or --dataset NAME with --root.")
    if data is not None:
        return discover_videos(data, folder_fps=folder_fps), str(Path(data).resolve())
    root_text = None if root is None else str(Path(root).resolve())
    return dataset_videos(dataset, root_text, split), f"{dataset}:{root_text}:{split}"
