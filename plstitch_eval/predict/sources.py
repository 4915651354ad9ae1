"""Which videos a predict run takes: files or frame folders named on the command line (`-` = stdin), the
videos of a `--root` folder, or a dataset's videos with their annotations; optional labels per video.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from plstitch_eval.data.datasets import VideoRecord, get_dataset, labels_at
from plstitch_eval.data.datasets.annotations import read_ground_truth, read_lines, read_phase_tsv
from plstitch_eval.data.datasets.base import natural_key
from plstitch_eval.data.media import VIDEO_EXTENSIONS, is_video_file
from plstitch_eval.data.video import probe as probe_video
from plstitch_eval.errors import ConfigError, DecodeError
from plstitch_eval.extract import select_videos
from plstitch_eval.predict.live import LiveSource, is_live, live_name

STDIN = "-"  # the VIDEO argument that reads the stream piped into stdin
STDIN_NAME = "stdin"  # its name in outputs and the summary
PHASE_TSV_HEADER = ("Frame", "Phase")  # Cholec80-style label files; any other file: one class per line


@dataclass(frozen=True)
class VideoSource:
    """One input: its name in the outputs, its file or frame folder (None: stdin) and optional labels
    (class ids at `label_fps`, from a `--labels` file or a dataset's annotations)."""

    name: str
    source: Path | None
    labels: np.ndarray | None = None
    label_fps: float | None = None
    folder_fps: float | None = None
    live: LiveSource | None = None  # a stream or capture device (`--online` only); `source` is then None

    @property
    def shown(self) -> str:
        """How messages name the input."""
        if self.live is not None:
            return self.live.address
        return STDIN_NAME if self.source is None else str(self.source)

    def ground_truth(self, frame_times: np.ndarray) -> np.ndarray | None:
        """Labels at the sampled frame times (step floor(t * label_fps)); -1 past the annotations."""
        if self.labels is None or self.label_fps is None:
            return None
        record = VideoRecord(self.name, self.source or Path(STDIN), self.labels, self.label_fps)
        labels, _ = labels_at(record, frame_times)
        out = np.full(len(frame_times), -1, dtype=np.int64)
        out[: len(labels)] = labels
        return out


def videos_in_folder(root: str | Path) -> list[Path]:
    """The video files (extraction's extensions) directly in `root`, in natural order."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ConfigError(f"{root}: --root is not a folder; pass the folder holding the videos.")
    found = [p for p in root.iterdir() if p.is_file() and is_video_file(p)]
    if not found:
        raise ConfigError(f"{root}: holds no video file ({' '.join(VIDEO_EXTENSIONS)}); pass another --root.")
    return sorted(found, key=lambda p: natural_key(p.name))


def read_labels(path: str | Path, class_names: Sequence[str]) -> np.ndarray:
    """Class ids of a label file: Cholec80-style `Frame<TAB>Phase` TSV (header first), else MS-TCN ground
    truth (one class name per line); names must be the probe's classes."""
    path = Path(path).expanduser()
    class_index = {name: i for i, name in enumerate(class_names)}
    lines = read_lines(path)
    if lines and tuple(lines[0].split()) == PHASE_TSV_HEADER:
        return read_phase_tsv(path, class_index)
    return read_ground_truth(path, class_index)


def sources_from_paths(
    videos: Sequence[str | Path],
    class_names: Sequence[str],
    labels: Sequence[str | Path] = (),
    label_fps: float | None = None,
    live: LiveSource | None = None,
) -> list[VideoSource]:
    """Inputs named on the command line (`-` = stdin; a URL or /dev/videoN: a live source opened as `live`
    says), each with its `--labels` file when given (in order).

    Labels are one per frame at `label_fps`, default the video's own frame rate (as Cholec80's files are).
    """
    if labels and len(labels) != len(videos):
        raise ConfigError(
            f"--labels was given {len(labels)} time(s) for {len(videos)} video(s); give one label file per "
            "video, in the same order."
        )
    if label_fps is not None and not label_fps > 0:
        raise ConfigError(f"--labels-fps must be > 0, got {label_fps}.")
    sources = []
    for i, video in enumerate(videos):
        labels_file = labels[i] if labels else None
        if is_live(str(video), None if live is None else live.input_format):
            sources.append(live_source(str(video), class_names, labels_file, label_fps, live))
            continue
        if str(video) == STDIN:
            path = None
        else:
            path = Path(video).expanduser()
            check_video(path)
        if labels_file is None:
            sources.append(VideoSource(STDIN_NAME if path is None else path.stem, path))
            continue
        if path is None and label_fps is None:
            raise ConfigError("--labels for stdin (-) needs --labels-fps (the rate of the label rows).")
        ids = read_labels(labels_file, class_names)
        rate = label_fps if label_fps is not None else _native_fps(path)
        sources.append(VideoSource(STDIN_NAME if path is None else path.stem, path, ids, rate))
    check_unique_names(sources)
    return sources


def live_source(
    address: str,
    class_names: Sequence[str],
    labels_file: str | Path | None,
    label_fps: float | None,
    live: LiveSource | None,
) -> VideoSource:
    """A live source (named after its address) opened with `live`'s format, options and timeouts."""
    settings = replace(live, address=address) if live is not None else LiveSource(address)
    if labels_file is None:
        return VideoSource(live_name(address), None, live=settings)
    if label_fps is None:
        raise ConfigError(f"--labels for {address} needs --labels-fps (the rate of the label rows).")
    ids = read_labels(labels_file, class_names)
    return VideoSource(live_name(address), None, ids, label_fps, live=settings)


def sources_from_dataset(
    dataset: str,
    root: str | Path | None,
    class_names: Sequence[str],
    split: str | None = None,
    videos: Sequence[str] | None = None,
    scheme: str | None = None,
) -> list[VideoSource]:
    """A dataset's videos (a split of it, or the named ones) with their annotations as ground truth; the
    dataset's classes must be the probe's."""
    adapter = get_dataset(dataset, root=root)
    records = select_videos(adapter, split, videos, scheme)
    if list(adapter.class_names) != list(class_names):
        raise ConfigError(
            f"Dataset {dataset!r} has classes {list(adapter.class_names)} but the probe predicts "
            f"{list(class_names)}; use a probe trained on {dataset} or leave --dataset out."
        )
    return [VideoSource(r.name, Path(r.source), r.labels, r.label_fps, r.folder_fps) for r in records]


def check_video(path: Path) -> None:
    """Refuse a missing file or one FFmpeg cannot open as a video (one line naming it); frame folders pass
    when they hold images."""
    if not path.exists():
        raise DecodeError(f"{path}: no such video file or frame folder; check the path.")
    probe_video(path)  # opens the container (or lists the folder): DecodeError naming the file


def check_unique_names(sources: Sequence[VideoSource]) -> None:
    """Two inputs may not write the same `<name>.csv`."""
    seen: dict[str, str] = {}
    for src in sources:
        if src.name in seen:
            raise ConfigError(
                f"{seen[src.name]} and {src.shown} would both write {src.name}.csv; predict them into "
                "different --out folders."
            )
        seen[src.name] = src.shown


def _native_fps(path: Path | None) -> float:
    info = probe_video(path) if path is not None else None
    if info is None or not info.fps > 0:
        raise ConfigError(f"{path}: states no frame rate; pass --labels-fps.")
    return float(info.fps)
