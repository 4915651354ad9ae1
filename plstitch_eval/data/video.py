"""Decode videos (PyAV/FFmpeg) and frame folders into RGB frames sampled by presentation time.

Sampling rule (both sources): target times are ``0, 1/fps, 2/fps, ...`` seconds after the first frame; for
each target we take the first frame whose presentation time is ``>= target`` (with a 1 microsecond tolerance).
A frame that satisfies several targets (a gap in a variable-frame-rate video) is emitted once and the targets
it covers are skipped. So a 25 fps video sampled at 1 fps yields frames 0, 25, 50, ... Each video is decoded
sequentially exactly once (no seeking) with FFmpeg's frame/slice threading on; only sampled frames are
converted to RGB (and resized on decode so the shorter side equals ``size``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from PIL import Image

from plstitch_eval.errors import ConfigError, DecodeError

IMAGE_EXTS = (".jpg", ".jpeg", ".png")
VIDEO_EXTS = (".mp4", ".avi", ".mkv", ".mov", ".webm", ".mpg", ".mpeg", ".m4v", ".ogv")
DEFAULT_FOLDER_FPS = 1.0  # frame folders without a stated rate are taken as 1 fps (AutoLaparo's release)
TIME_TOLERANCE = 1e-6  # seconds; absorbs float rounding of pts * time_base against k / fps


@dataclass(frozen=True)
class DecodedFrame:
    """One sampled frame: sample number, presentation time (s) and uint8 HWC RGB pixels."""

    index: int
    time: float
    image: np.ndarray


@dataclass(frozen=True)
class VideoInfo:
    """Container-level facts about a video or frame folder."""

    fps: float
    n_frames: int
    duration: float
    width: int
    height: int


def read_frames(
    source: str | os.PathLike,
    fps: float | None = None,
    size: int | None = None,
    *,
    folder_fps: float | None = None,
) -> Iterator[DecodedFrame]:
    """Yield frames of a video file or frame folder sampled at `fps` (None = every frame).

    `size` resizes so the shorter side equals it (aspect kept). `folder_fps` is the frame rate of a frame
    folder (frame i is at time i / folder_fps; default 1 fps).
    """
    path = Path(source)
    if fps is not None and fps <= 0:
        raise ConfigError(f"fps must be positive, got {fps}")
    if size is not None and size <= 0:
        raise ConfigError(f"size must be positive, got {size}")
    if path.is_dir():
        return _read_folder(path, fps, size, folder_fps)
    if not path.exists():
        raise DecodeError(f"{path}: no such video file or frame folder; check the dataset root and layout")
    return _read_video(path, fps, size)


def probe(source: str | os.PathLike, *, folder_fps: float | None = None) -> VideoInfo:
    """Frame rate, frame count, duration and size of a video (from the container) or frame folder."""
    path = Path(source)
    if path.is_dir():
        files = list_frame_files(path)
        width, height = _open_image(files[0]).size
        rate = float(folder_fps) if folder_fps else DEFAULT_FOLDER_FPS
        return VideoInfo(rate, len(files), len(files) / rate, width, height)
    if not path.exists():
        raise DecodeError(f"{path}: no such video file or frame folder; check the dataset root and layout")
    try:
        with av.open(str(path)) as container:
            stream = _video_stream(container, path)
            rate = float(stream.average_rate or stream.guessed_rate or 0)
            if stream.duration is not None and stream.time_base is not None:
                duration = float(stream.duration * stream.time_base)
            elif container.duration is not None:
                duration = container.duration / av.time_base
            else:
                duration = 0.0
            n_frames = int(stream.frames) or int(round(duration * rate))
            return VideoInfo(rate, n_frames, duration, stream.width, stream.height)
    except av.FFmpegError as exc:
        raise DecodeError(f"{path}: cannot open video ({exc}); the file is corrupt or not a video") from exc


def list_frame_files(folder: str | os.PathLike) -> list[Path]:
    """The jpg/png files of a frame folder in natural order (frame2 before frame10)."""
    folder = Path(folder)
    files = [p for p in folder.iterdir() if p.suffix.lower() in IMAGE_EXTS and not p.name.startswith(".")]
    if not files:
        raise DecodeError(f"{folder}: frame folder holds no {'/'.join(IMAGE_EXTS)} images")
    return sorted(files, key=_natural_key)


def resized_shape(width: int, height: int, size: int | None) -> tuple[int, int]:
    """(width, height) after resizing the shorter side to `size`, rounding the longer side."""
    if size is None:
        return width, height
    if width <= height:
        return size, max(1, round(height * size / width))
    return max(1, round(width * size / height)), size


class _TargetClock:
    """Decides which presentation times are sampled: the first frame at or after each k / fps."""

    def __init__(self, fps: float | None) -> None:
        self.step = None if fps is None else Fraction(fps).limit_denominator(1_000_000)
        self.k = 0

    def take(self, time: float) -> bool:
        """True if the frame at `time` is sampled; advances past every target it covers."""
        if self.step is None:
            return True
        if time + TIME_TOLERANCE < float(self.k / self.step):
            return False
        # skip all targets this frame satisfies so it is emitted once
        self.k = int(np.floor((time + TIME_TOLERANCE) * float(self.step))) + 1
        return True


def _read_video(path: Path, fps: float | None, size: int | None) -> Iterator[DecodedFrame]:
    """Sequential threaded decode of one video file, sampling by presentation timestamps."""
    try:
        container = av.open(str(path))
    except av.FFmpegError as exc:
        raise DecodeError(f"{path}: cannot open video ({exc}); the file is corrupt or not a video") from exc
    with container:
        stream = _video_stream(container, path)
        stream.thread_type = "AUTO"
        width, height = resized_shape(stream.width, stream.height, size)
        clock = _TargetClock(fps)
        time_base = stream.time_base
        origin = stream.start_time
        rate = stream.average_rate or stream.guessed_rate or 25
        n_decoded = n_out = 0
        last_time = None
        try:
            for frame in container.decode(stream):
                if frame.pts is None:
                    time = (last_time + 1.0 / float(rate)) if last_time is not None else 0.0
                else:
                    if origin is None:
                        origin = frame.pts
                    time = float((frame.pts - origin) * time_base)
                last_time = time
                n_decoded += 1
                if not clock.take(time):
                    continue
                if size is None:
                    image = frame.to_ndarray(format="rgb24")
                else:
                    image = frame.to_ndarray(format="rgb24", width=width, height=height)
                yield DecodedFrame(n_out, time, image)
                n_out += 1
        except av.FFmpegError as exc:
            raise DecodeError(
                f"{path}: decoding failed after {n_decoded} frames ({exc}); the file is corrupt or truncated"
            ) from exc
        if n_decoded == 0:
            raise DecodeError(f"{path}: no frame could be decoded; the file is corrupt or truncated")
        expected = int(stream.frames)
        if expected and n_decoded < expected - max(2, expected // 100):
            raise DecodeError(
                f"{path}: decoded {n_decoded} of {expected} frames the container announces; "
                "the file is truncated - re-download or re-encode it"
            )


def _read_folder(
    folder: Path, fps: float | None, size: int | None, folder_fps: float | None
) -> Iterator[DecodedFrame]:
    """Read a folder of frames in natural order; frame i is at time i / folder_fps."""
    rate = float(folder_fps) if folder_fps is not None else DEFAULT_FOLDER_FPS
    if rate <= 0:
        raise ConfigError(f"{folder}: folder_fps must be positive, got {folder_fps}")
    files = list_frame_files(folder)
    clock = _TargetClock(fps)
    n_out = 0
    for i, file in enumerate(files):
        time = i / rate
        if not clock.take(time):
            continue
        image = _open_image(file)
        if size is not None:
            image = image.resize(resized_shape(*image.size, size), Image.BILINEAR)
        yield DecodedFrame(n_out, time, np.asarray(image, dtype=np.uint8))
        n_out += 1


def _open_image(file: Path) -> Image.Image:
    """Open and fully decode an image as RGB, naming the file on failure."""
    try:
        with Image.open(file) as img:
            return img.convert("RGB")
    except (OSError, ValueError) as exc:
        raise DecodeError(f"{file}: cannot decode image ({exc}); the file is corrupt") from exc


def _video_stream(container: av.container.InputContainer, path: Path) -> av.VideoStream:
    """The first video stream of a container, or a DecodeError naming the file."""
    if not container.streams.video:
        raise DecodeError(f"{path}: holds no video stream")
    return container.streams.video[0]


def _natural_key(path: Path) -> list[object]:
    """Sort key that orders embedded numbers numerically."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", path.name)]
