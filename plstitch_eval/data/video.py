"""Decode videos (PyAV/FFmpeg) and frame folders into RGB frames sampled by presentation time.

Sampling rule (both sources): target times are ``0, 1/fps, 2/fps, ...`` seconds after the first frame; for
each target we take the first frame whose presentation time is ``>= target`` (with a 1 microsecond tolerance).
A frame that satisfies several targets (a gap in a variable-frame-rate video) is emitted once and the targets
it covers are skipped. So a 25 fps video sampled at 1 fps yields frames 0, 25, 50, ... Each video is decoded
sequentially exactly once (no seeking), with FFmpeg's frame/slice threads or one thread per process; a
pass over the packets first finds the sampled frames, so that non-reference frames nobody samples are not
decoded at all (the decoded frames are bit-identical to a full decode). Only sampled frames are converted to
RGB (and resized on decode so the shorter side equals ``size``).

Clip encoders (`read_clips`) see a window of frames around each sampled frame: window frame k of the frame
sampled for target time ``T`` is the first frame at or after ``T + (k - anchor) * step`` (the same rule), the
first frame when that time is before the video and the last frame when it is past its end. Frames are decoded
once, in order; only frames some window uses are converted, each once, and kept until no later window needs
them.

This is the `pyav` decoder. `plstitch_eval.data.torchcodec_decode` (TorchCodec, CPU or NVDEC) takes its
sampling rule and window assembly from here; `plstitch_eval.data.decoders` picks a decoder by name.
"""

from __future__ import annotations

import math
import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from PIL import Image

from plstitch_eval.data.media import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS, is_image_file
from plstitch_eval.errors import ConfigError, DecodeError

IMAGE_EXTS = IMAGE_EXTENSIONS  # older names, kept for importers; the rule lives in plstitch_eval.data.media
VIDEO_EXTS = VIDEO_EXTENSIONS
DEFAULT_FOLDER_FPS = 1.0  # frame folders without a stated rate are taken as 1 fps (AutoLaparo's release)
TIME_TOLERANCE = 1e-6  # seconds; absorbs float rounding of pts * time_base against k / fps
DEFAULT_VIDEO_FPS = 25  # a video stream that states no frame rate


@dataclass(frozen=True)
class DecodedFrame:
    """One sampled frame: sample number, presentation time (s) and uint8 HWC RGB pixels."""

    index: int
    time: float
    image: np.ndarray


@dataclass(frozen=True)
class ClipSampling:
    """The window a clip encoder sees around each sampled frame: `num_frames` frames `step` apart, the sampled
    frame at position `anchor` (default `num_frames // 2`, so the window is centred on it).

    `frame_stride` counts frames at the video's own rate (VideoMAE-style `sampling_rate`); `stride_seconds`,
    when set, is a fixed time between window frames instead (TimeSformer-style sampling at a target fps).
    """

    num_frames: int
    frame_stride: int = 1
    stride_seconds: float | None = None
    anchor: int | None = None

    def __post_init__(self) -> None:
        if self.num_frames < 1:
            raise ConfigError(f"A clip needs at least one frame, got num_frames={self.num_frames}.")
        if self.frame_stride < 1:
            raise ConfigError(f"Clip frame_stride must be >= 1 frame, got {self.frame_stride}.")
        if self.stride_seconds is not None and not self.stride_seconds > 0:
            raise ConfigError(f"Clip stride_seconds must be > 0, got {self.stride_seconds}.")
        anchor = self.num_frames // 2 if self.anchor is None else self.anchor
        if not 0 <= anchor < self.num_frames:
            raise ConfigError(f"Clip anchor must be in [0, {self.num_frames}), got {anchor}.")
        object.__setattr__(self, "anchor", anchor)

    def step(self, native_fps: float) -> float:
        """Seconds between window frames in a video of `native_fps` frames per second."""
        if self.stride_seconds is not None:
            return float(self.stride_seconds)
        return self.frame_stride / native_fps

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (manifests, provenance)."""
        return asdict(self)


@dataclass(frozen=True)
class DecodedClip:
    """The window of one sampled frame: sample number and time (as `read_frames` gives them) and its frames,
    oldest first, as `prepare` made them (uint8 HWC RGB arrays without one), with their times."""

    index: int
    time: float
    frames: tuple[Any, ...]
    frame_times: tuple[float, ...]


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
    path = Path(source)
    check_sampling(fps, size, clips=True)
    if path.is_dir():
        rate = float(folder_fps) if folder_fps is not None else DEFAULT_FOLDER_FPS
        if rate <= 0:
            raise ConfigError(f"{path}: folder_fps must be positive, got {folder_fps}")
        frames = _folder_frames(path, rate, size)
    elif not path.exists():
        raise DecodeError(f"{path}: no such video file or frame folder; check the dataset root and layout")
    else:
        rate = probe(path).fps or DEFAULT_VIDEO_FPS
        frames = _video_frames(path, size, threads)
    yield from assemble_clips(frames, fps, clip, rate, prepare)


def assemble_clips(
    frames: Iterable[tuple[float, Callable[[], np.ndarray]]],
    fps: float,
    clip: ClipSampling,
    native_fps: float,
    prepare: Callable[[np.ndarray], Any] | None = None,
) -> Iterator[DecodedClip]:
    """The windows of `read_clips` from (time, loader of its RGB pixels) of every frame in presentation order,
    whichever decoder gives them; a frame is loaded only if some window uses it."""
    assembler = _WindowAssembler(clip, fps, clip.step(native_fps), prepare or (lambda image: image))
    for time, load in frames:
        yield from assembler.push(time, load)
    yield from assembler.finish()


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


class _Window:
    """One sampled frame's window being filled: its frame times and the frames found so far."""

    def __init__(self, index: int, time: float, window_times: tuple[float, ...]) -> None:
        self.index = index
        self.time = time
        self.window_times = window_times
        self.frames: list[Any] = [None] * len(window_times)
        self.frame_times: list[float] = [math.nan] * len(window_times)
        self.filled = [False] * len(window_times)

    def offer(self, time: float, frame: Any) -> None:
        """A newly decoded frame (frames arrive in time order): it is the first at or after every still-open
        window time it reaches."""
        for k, wanted in enumerate(self.window_times):
            if not self.filled[k] and wanted <= time + TIME_TOLERANCE:
                self.frames[k], self.frame_times[k], self.filled[k] = frame, time, True

    def fill_rest(self, time: float, frame: Any) -> None:
        """Window times past the last frame of the video take that last frame."""
        for k in range(len(self.window_times)):
            if not self.filled[k]:
                self.frames[k], self.frame_times[k], self.filled[k] = frame, time, True

    @property
    def complete(self) -> bool:
        """True once every window time has its frame."""
        return all(self.filled)

    def clip(self) -> DecodedClip:
        """The finished window."""
        return DecodedClip(self.index, self.time, tuple(self.frames), tuple(self.frame_times))


class _WindowAssembler:
    """Turns frames pushed in decoding order into the windows of the sampled frames (see `read_clips`).

    Window times of target m are T_m + (k - anchor) * step with T_m = m / fps, the targets of `_TargetClock`.
    A frame is prepared only if it is the first frame at or after some window time (the first frame stands
    in for every time before it), and kept only while a window not yet opened may still need it.
    """

    def __init__(self, clip: ClipSampling, fps: float, step: float, prepare: Callable[[np.ndarray], Any]):
        anchor = int(clip.anchor or 0)
        self.offsets = tuple((k - anchor) * step for k in range(clip.num_frames))
        self.clock = _TargetClock(fps)
        self.fps = float(fps)
        self.prepare = prepare
        self.kept: deque[tuple[float, Any]] = deque()  # (time, prepared frame), oldest first
        self.pending: deque[_Window] = deque()  # windows waiting for later frames, in sampling order
        self.previous: float | None = None  # time of the frame pushed before
        self.last: tuple[float, Callable[[], np.ndarray]] | None = None
        self.n_out = 0
        self.target_times: dict[int, float] = {}  # T_m as the clock computes it (exact Fraction, then float)

    def window_time(self, target: int, k: int) -> float:
        """Time of frame k of target `target`'s window: the clock's own float of T_target, plus the offset."""
        start = self.target_times.get(target)
        if start is None:
            if len(self.target_times) > 4096:  # targets only move forward: forget the old ones
                self.target_times.clear()
            start = self.target_times[target] = float(target / self.clock.step)
        return start + self.offsets[k]

    def needed(self, time: float) -> bool:
        """True when the frame at `time` is the first frame at or after some window time of some target."""
        if self.previous is None:
            return True
        for k, offset in enumerate(self.offsets):
            highest = math.floor((time + TIME_TOLERANCE - offset) * self.fps)
            for target in (highest + 1, highest, highest - 1):
                if target < 0:
                    continue
                wanted = self.window_time(target, k)
                if self.previous + TIME_TOLERANCE < wanted <= time + TIME_TOLERANCE:
                    return True
        return False

    def push(self, time: float, load: Callable[[], np.ndarray]) -> list[DecodedClip]:
        """Take the next decoded frame; return the windows it completes, in sampling order."""
        self.last = (time, load)
        target = self.clock.k
        sampled = self.clock.take(time)
        if sampled or self.needed(time):
            frame = self.prepare(load())
            self.kept.append((time, frame))
            for window in self.pending:
                window.offer(time, frame)
        if sampled:
            window_times = tuple(self.window_time(target, k) for k in range(len(self.offsets)))
            window = _Window(self.n_out, time, window_times)
            for kept_time, kept_frame in self.kept:
                window.offer(kept_time, kept_frame)
            self.pending.append(window)
            self.n_out += 1
        self.previous = time
        earliest = self.window_time(self.clock.k, 0)  # no window opened later looks further back
        while self.kept and self.kept[0][0] + TIME_TOLERANCE < earliest:
            self.kept.popleft()
        return self._complete()

    def finish(self) -> list[DecodedClip]:
        """The stream ended: fill what is left with the last frame and return the remaining windows."""
        if self.pending and self.last is not None:
            time, load = self.last
            frame = self.kept[-1][1] if self.kept and self.kept[-1][0] == time else self.prepare(load())
            for window in self.pending:
                window.fill_rest(time, frame)
        return self._complete()

    def _complete(self) -> list[DecodedClip]:
        done = []
        while self.pending and self.pending[0].complete:
            done.append(self.pending.popleft().clip())
        return done


def _read_video(path: Path, fps: float | None, size: int | None, threads: int) -> Iterator[DecodedFrame]:
    """Sequential decode of one video file, sampling by presentation timestamps."""
    clock = _TargetClock(fps)
    n_out = 0
    for time, frame in _decode_video(path, threads, fps):
        if not clock.take(time):
            continue
        yield DecodedFrame(n_out, time, _frame_to_rgb(frame, size, path))
        n_out += 1


@dataclass(frozen=True)
class _PacketPlan:
    """Presentation timestamps of a video's packets and those `_TargetClock(fps)` takes among them."""

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
    clock = _TargetClock(fps)
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
    path: Path, threads: int = 0, fps: float | None = None
) -> Iterator[tuple[float, av.VideoFrame]]:
    """(presentation time in seconds after the first frame, frame) of every frame, decoded once in order.

    `threads` 0 lets FFmpeg use frame and slice threads over every core; 1 decodes on the calling thread only
    (several decoding processes, one per core, lose less to thread hand-offs than one process's threads).
    With `fps`, a first pass over the packets (no decoding) finds the frames sampling at `fps` takes, and the
    decoder skips the other non-reference frames (FFmpeg's skip_frame=NONREF: nothing refers to them, so
    every decoded frame is bit-identical to a full decode); the frames sampling takes are always decoded. A
    decoded frame whose timestamp no packet had turns skipping off for the rest of the video.
    """
    try:
        container = av.open(str(path))
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


def check_frame_count(path: Path, n_packets: int, expected: int) -> None:
    """Refuse a file holding fewer frame packets than its container announces (2 or 1 % missing are let
    pass: some muxers round), naming the file: it was cut short."""
    if expected and n_packets < expected - max(2, expected // 100):
        raise DecodeError(
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
    clock = _TargetClock(fps)
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
