"""Decode videos (PyAV/FFmpeg) and frame folders into RGB frames sampled by presentation time.

Frames are sampled by the rule of `plstitch_eval.data.sampling` (both sources): the first frame at or after
each ``k / fps`` seconds after the first frame, a frame covering several targets taken once. So a 25 fps video
sampled at 1 fps yields frames 0, 25, 50, ... Each video is decoded sequentially exactly once (no seeking),
with FFmpeg's frame/slice threads or one thread per process; a pass over the packets first finds the sampled
frames, so that non-reference frames nobody samples are not decoded at all (the decoded frames are
bit-identical to a full decode). Only sampled frames are converted to RGB (and resized on decode so the
shorter side equals ``size``).

Clip encoders (`read_clips`) see a window of frames around each sampled frame (`sampling.ClipSampling`,
assembled by `sampling.assemble_clips`); frames are decoded once, in order, and only those some window uses
are converted, each once.

This is the `pyav` decoder on the CPU. `plstitch_eval.data.pyav_cuda` is the same decoder on NVDEC: it opens
the file with PyAV's CUDA hwaccel (`sampled_video_frames(..., open_container=...)`) and so chooses the same
frames. `plstitch_eval.data.torchcodec_decode` (TorchCodec, CPU or NVDEC) shares the sampling rule and window
assembly; `plstitch_eval.data.decoders` picks a decoder by name.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from PIL import Image

from plstitch_eval.data.media import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS, is_image_file
from plstitch_eval.data.sampling import TIME_TOLERANCE as TIME_TOLERANCE  # re-exported for importers
from plstitch_eval.data.sampling import ClipSampling, DecodedClip, TargetClock, assemble_clips
from plstitch_eval.errors import ConfigError, DecodeError

IMAGE_EXTS = IMAGE_EXTENSIONS  # older names, kept for importers; the rule lives in plstitch_eval.data.media
VIDEO_EXTS = VIDEO_EXTENSIONS
DEFAULT_FOLDER_FPS = 1.0  # frame folders without a stated rate are taken as 1 fps (AutoLaparo's release)
DEFAULT_VIDEO_FPS = 25  # a video stream that states no frame rate


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
    threads: int = 0,
) -> Iterator[DecodedFrame]:
    """Yield frames of a video file or frame folder sampled at `fps` (None = every frame).

    `size` resizes so the shorter side equals it (aspect kept). `folder_fps` is the frame rate of a frame
    folder (frame i is at time i / folder_fps; default 1 fps). `threads`: FFmpeg decoding threads for a video
    (0 = one per core; 1 = none, for one decoding process per core).
    """
    path = Path(source)
    check_sampling(fps, size)
    if path.is_dir():
        return _read_folder(path, fps, size, folder_fps)
    if not path.exists():
        raise DecodeError(f"{path}: no such video file or frame folder; check the dataset root and layout")
    return _read_video(path, fps, size, threads)


def read_clips(
    source: str | os.PathLike,
    fps: float,
    clip: ClipSampling,
    size: int | None = None,
    *,
    folder_fps: float | None = None,
    prepare: Callable[[np.ndarray], Any] | None = None,
    threads: int = 0,
) -> Iterator[DecodedClip]:
    """Yield the window of every frame `read_frames(source, fps, size)` samples, decoding the source once.

    `prepare` (e.g. resize + crop) runs once per frame a window uses; windows share the prepared objects.
    The step between window frames is `clip.step(native fps)`: the container's rate, `folder_fps` for folders.
    `threads` as for `read_frames`.
    """
    check_sampling(fps, size, clips=True)
    rate, frames = every_frame(source, size, folder_fps=folder_fps, threads=threads)
    yield from assemble_clips(frames, fps, clip, rate, prepare)


def every_frame(
    source: str | os.PathLike, size: int | None = None, *, folder_fps: float | None = None, threads: int = 0
) -> tuple[float, Iterator[tuple[float, Callable[[], np.ndarray]]]]:
    """(native frame rate, (time, loader of its RGB pixels) of every frame) of a video file or frame folder:
    what clip windows are assembled from. The rate is the container's, `folder_fps` for folders."""
    path = Path(source)
    if path.is_dir():
        rate = float(folder_fps) if folder_fps is not None else DEFAULT_FOLDER_FPS
        if rate <= 0:
            raise ConfigError(f"{path}: folder_fps must be positive, got {folder_fps}")
        return rate, _folder_frames(path, rate, size)
    if not path.exists():
        raise DecodeError(f"{path}: no such video file or frame folder; check the dataset root and layout")
    return probe(path).fps or DEFAULT_VIDEO_FPS, _video_frames(path, size, threads)


def check_sampling(fps: float | None, size: int | None, *, clips: bool = False) -> None:
    """Refuse a sampling rate or resize side no decoder can use (clip windows need an fps)."""
    if clips and (fps is None or fps <= 0):
        raise ConfigError(f"Clip windows are built around frames sampled at an fps > 0, got {fps}.")
    if fps is not None and fps <= 0:
        raise ConfigError(f"fps must be positive, got {fps}")
    if size is not None and size <= 0:
        raise ConfigError(f"size must be positive, got {size}")


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
    """The frame images (`media.is_image_file`) of a folder in natural order (frame2 before frame10)."""
    folder = Path(folder)
    files = [p for p in folder.iterdir() if is_image_file(p)]
    if not files:
        raise DecodeError(f"{folder}: frame folder holds no {'/'.join(IMAGE_EXTENSIONS)} images")
    return sorted(files, key=_natural_key)


def resized_shape(width: int, height: int, size: int | None) -> tuple[int, int]:
    """(width, height) after resizing the shorter side to `size`, rounding the longer side."""
    if size is None:
        return width, height
    if width <= height:
        return size, max(1, round(height * size / width))
    return max(1, round(width * size / height)), size


def _read_video(path: Path, fps: float | None, size: int | None, threads: int) -> Iterator[DecodedFrame]:
    """Sequential decode of one video file, sampling by presentation timestamps."""
    for n_out, (time, frame) in enumerate(sampled_video_frames(path, fps, threads)):
        yield DecodedFrame(n_out, time, _frame_to_rgb(frame, size, path))


def open_video(path: Path) -> av.container.InputContainer:
    """A video file opened for FFmpeg's software decoders (the default `ContainerOpener`)."""
    return av.open(str(path))


ContainerOpener = Callable[[Path], av.container.InputContainer]  # how `_decode_video` opens a file


def sampled_video_frames(
    path: Path, fps: float | None, threads: int = 0, open_container: ContainerOpener = open_video
) -> Iterator[tuple[float, av.VideoFrame]]:
    """(time, decoded frame) of the frames sampling at `fps` takes (None: every frame), in order, before any
    conversion: the frame choice of every PyAV path, whichever decoder `open_container` attaches (NVDEC's:
    `plstitch_eval.data.pyav_cuda`)."""
    clock = TargetClock(fps)
    for time, frame in _decode_video(path, threads, fps, open_container):
        if clock.take(time):
            yield time, frame


@dataclass(frozen=True)
class _PacketPlan:
    """Presentation timestamps of a video's packets and those `TargetClock(fps)` takes among them."""

    all_pts: frozenset[int]
    sampled: frozenset[int]


def _sampled_pts(
    packets_pts: list[int | None], origin: int | None, time_base: Fraction, fps: float
) -> _PacketPlan | None:
    """The packets' timestamps and the sampled ones (None when a packet has no timestamp: then nothing may be
    skipped)."""
    if not packets_pts or any(pts is None for pts in packets_pts):
        return None
    ordered = sorted(set(packets_pts))  # type: ignore[arg-type]
    start = ordered[0] if origin is None else origin
    clock = TargetClock(fps)
    sampled = frozenset(pts for pts in ordered if clock.take(float((pts - start) * time_base)))
    return _PacketPlan(frozenset(ordered), sampled)


def _packet_pass(path: Path, origin: int | None, time_base: Fraction, fps: float) -> _PacketPlan | None:
    """`_sampled_pts` of a video from a pass over its packets in a container of its own (reads, no
    decoding); None when it cannot be read, so that the decoding pass reports the error and skips nothing."""
    try:
        with av.open(str(path)) as container:
            stream = _video_stream(container, path)
            packets_pts = [packet.pts for packet in container.demux(stream) if packet.size]
    except (av.FFmpegError, DecodeError):
        return None
    return _sampled_pts(packets_pts, origin, time_base, fps)


def _decode_video(
    path: Path, threads: int = 0, fps: float | None = None, open_container: ContainerOpener = open_video
) -> Iterator[tuple[float, av.VideoFrame]]:
    """(presentation time in seconds after the first frame, frame) of every frame, decoded once in order.

    `threads` 0 lets FFmpeg use frame and slice threads over every core; 1 decodes on the calling thread only
    (several decoding processes, one per core, lose less to thread hand-offs than one process's threads).
    With `fps`, a first pass over the packets (no decoding) finds the frames sampling at `fps` takes, and the
    decoder skips the other non-reference frames (FFmpeg's skip_frame=NONREF: nothing refers to them, so
    every decoded frame is bit-identical to a full decode); the frames sampling takes are always decoded. A
    decoded frame whose timestamp no packet had turns skipping off for the rest of the video.
    `open_container` opens the file for decoding (the packet pass opens its own, plain).
    """
    try:
        container = open_container(path)
    except av.FFmpegError as exc:
        raise DecodeError(f"{path}: cannot open video ({exc}); the file is corrupt or not a video") from exc
    with container:
        stream = _video_stream(container, path)
        if threads != 1:
            stream.thread_type = "AUTO"
        stream.thread_count = threads
        time_base = stream.time_base
        origin = stream.start_time
        rate = stream.average_rate or stream.guessed_rate or DEFAULT_VIDEO_FPS
        plan = None if fps is None or time_base is None else _packet_pass(path, origin, time_base, fps)
        codec = stream.codec_context
        n_decoded = n_packets = 0
        last_time = None
        try:
            for packet in container.demux(stream):
                if packet.size:
                    n_packets += 1
                    if plan is not None:
                        codec.skip_frame = "DEFAULT" if packet.pts in plan.sampled else "NONREF"
                for frame in codec.decode(packet):
                    if plan is not None and frame.pts not in plan.all_pts:  # frames not timed as packets:
                        plan = None  # the sampled set may not hold; decode everything from here on
                        codec.skip_frame = "DEFAULT"
                    if frame.pts is None:
                        time = (last_time + 1.0 / float(rate)) if last_time is not None else 0.0
                    else:
                        if origin is None:
                            origin = frame.pts
                        time = float((frame.pts - origin) * time_base)
                    last_time = time
                    n_decoded += 1
                    yield time, frame
        except av.FFmpegError as exc:
            raise DecodeError(
                f"{path}: decoding failed after {n_decoded} frames ({exc}); the file is corrupt or truncated"
            ) from exc
        if n_decoded == 0:
            raise DecodeError(f"{path}: no frame could be decoded; the file is corrupt or truncated")
        check_frame_count(path, n_packets, int(stream.frames))


class TruncatedVideo(DecodeError):
    """A file holding fewer frame packets than its container announces (`check_frame_count`): cut short,
    whichever decoder reads it."""


def check_frame_count(path: Path, n_packets: int, expected: int) -> None:
    """Refuse a file holding fewer frame packets than its container announces (2 or 1 % missing are let
    pass: some muxers round), naming the file: it was cut short."""
    if expected and n_packets < expected - max(2, expected // 100):
        raise TruncatedVideo(
            f"{path}: decoded {n_packets} of {expected} frames the container announces; "
            "the file is truncated - re-download or re-encode it"
        )


def _frame_to_rgb(frame: av.VideoFrame, size: int | None, path: Path) -> np.ndarray:
    """A decoded frame as uint8 HWC RGB, its shorter side resized to `size` on conversion when given."""
    try:
        if size is None:
            return frame.to_ndarray(format="rgb24")
        width, height = resized_shape(frame.width, frame.height, size)
        return frame.to_ndarray(format="rgb24", width=width, height=height)
    except av.FFmpegError as exc:
        raise DecodeError(
            f"{path}: cannot convert a decoded frame to RGB ({exc}); the file is corrupt"
        ) from exc


def _video_frames(
    path: Path, size: int | None, threads: int = 0
) -> Iterator[tuple[float, Callable[[], np.ndarray]]]:
    """(time, loader of its RGB pixels) of every frame of a video; a frame is converted only if loaded."""
    for time, frame in _decode_video(path, threads):
        yield time, (lambda frame=frame: _frame_to_rgb(frame, size, path))


def _folder_frames(
    folder: Path, rate: float, size: int | None
) -> Iterator[tuple[float, Callable[[], np.ndarray]]]:
    """(time i / rate, loader of its RGB pixels) of every image of a frame folder, in natural order."""
    for i, file in enumerate(list_frame_files(folder)):
        yield i / rate, (lambda file=file: _load_image(file, size))


def _load_image(file: Path, size: int | None) -> np.ndarray:
    """One frame-folder image as uint8 HWC RGB, its shorter side resized to `size` (bilinear) when given."""
    image = _open_image(file)
    if size is not None:
        image = image.resize(resized_shape(*image.size, size), Image.BILINEAR)
    return np.asarray(image, dtype=np.uint8)


def _read_folder(
    folder: Path, fps: float | None, size: int | None, folder_fps: float | None
) -> Iterator[DecodedFrame]:
    """Read a folder of frames in natural order; frame i is at time i / folder_fps."""
    rate = float(folder_fps) if folder_fps is not None else DEFAULT_FOLDER_FPS
    if rate <= 0:
        raise ConfigError(f"{folder}: folder_fps must be positive, got {folder_fps}")
    files = list_frame_files(folder)
    clock = TargetClock(fps)
    n_out = 0
    for i, file in enumerate(files):
        time = i / rate
        if not clock.take(time):
            continue
        yield DecodedFrame(n_out, time, _load_image(file, size))
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
