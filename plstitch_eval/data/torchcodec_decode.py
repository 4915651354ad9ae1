"""Decode video files with TorchCodec - FFmpeg on the CPU, or NVDEC on a CUDA device - choosing exactly the
frames PyAV's path (`plstitch_eval.data.video`) chooses.

Which frames: a pass over the file's packets (PyAV demuxing, no decoding; PyAV's path makes the same pass)
gives every frame's presentation time, computed as PyAV's path computes it; that path's rule (`TargetClock`:
the first frame at or after each k / fps, a frame covering several targets emitted once) picks among them,
and TorchCodec decodes the picked frames by index (`VideoDecoder.get_frames_at`; its exact seek mode numbers
frames in presentation order, the order of the sorted packet times). Both decoders so give the same frame
indices and times, at constant and variable frame rates and with B-frames; every frame TorchCodec returns is
checked against the time asked for. A file whose packets carry no timestamps (or repeat one) cannot be
numbered this way and is read by PyAV, with a warning naming it.

Pixels: full-size frames are converted to RGB by FFmpeg's swscale on the CPU, as PyAV converts them
(identical on the test videos). A resize on decode (`size`) is bilinear and antialiased in RGB - TorchCodec's
own `Resize` on the CPU, torchvision's on CUDA - where PyAV's swscale scales in YUV: mean 2.3 grey levels
apart on noisy 854x480 content (docs/extract.md). On CUDA, NVDEC decodes and converts colour on the GPU;
`decode_batches` leaves the frames there, resized there, with no copy to the host.

TorchCodec is optional (`pip install "plstitch[torchcodec]"`) and loads the system's FFmpeg (4 to 8);
`unavailable_reason` says in one line which of the two is missing and how to get it.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import numpy as np
import torch
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as tvf

from plstitch_eval.data.sampling import TargetClock
from plstitch_eval.data.video import (
    DEFAULT_VIDEO_FPS,
    TIME_TOLERANCE,
    DecodedFrame,
    _video_stream,
    check_frame_count,
    resized_shape,
)
from plstitch_eval.errors import ConfigError, DecodeError

INSTALL_HINT = 'pip install "plstitch[torchcodec]"'
FFMPEG_HINT = "apt-get install ffmpeg, conda install ffmpeg or brew install ffmpeg"
BATCH_BYTES = 64 * 2**20  # RGB frames one `get_frames_at` call may hold (bounds memory on large videos)
MAX_BATCH = 32  # frames per `get_frames_at` call on small videos


class DecoderUnavailable(ConfigError):
    """A decoder cannot run on this machine (a package or a system library is missing); says the fix."""


class UnnumberedFrames(DecodeError):
    """A file whose frames cannot be numbered from its packets (no timestamps, or one repeated)."""


@functools.cache
def unavailable_reason() -> str | None:
    """Why TorchCodec cannot decode videos here, in one line with the fix (None when it can).

    Cached: it imports TorchCodec once (which loads FFmpeg's libraries).
    """
    try:
        torchcodec = importlib.import_module("torchcodec")
    except ImportError:
        return f"TorchCodec is not installed: {INSTALL_HINT}, and FFmpeg 4-8 for it ({FFMPEG_HINT})"
    except Exception as exc:  # its libraries fail to load, e.g. built for another torch
        return f"TorchCodec does not load ({_short(exc)}); reinstall it for this torch: {INSTALL_HINT}"
    if getattr(torchcodec, "ffmpeg_major_version", None) is None:
        return f"TorchCodec finds no FFmpeg libraries (it loads the system's FFmpeg 4-8): {FFMPEG_HINT}"
    return None


def require_torchcodec(option: str = "--decoder torchcodec") -> None:
    """Raise `DecoderUnavailable` (one line: what is missing, the fix) unless TorchCodec can decode here."""
    reason = unavailable_reason()
    if reason is not None:
        raise DecoderUnavailable(f"{option}: {reason}.")


def _short(exc: BaseException) -> str:
    """An exception's first line without TorchCodec's C++ `Function, file.cpp:123, ` prefix."""
    text = (str(exc) or type(exc).__name__).splitlines()[0]
    return re.sub(r"^\w+, \S+:\d+, ", "", text)


# ------------------------------------------------------------------------------------------- frame times


@dataclass(frozen=True)
class FrameTimeline:
    """Every frame of a video file in presentation order: its time in seconds after the first frame (as PyAV's
    path computes it) and its pts in seconds (as TorchCodec reports it); the stream's rate and size."""

    times: tuple[float, ...]
    pts_seconds: tuple[float, ...]
    native_fps: float
    width: int
    height: int


def frame_timeline(path: Path) -> FrameTimeline:
    """The timeline of `path` from a pass over its packets (reads, no decoding).

    Raises DecodeError naming the file when it cannot be opened, holds no frame or is cut short (fewer
    packets than announced, as PyAV's path checks), and `UnnumberedFrames` when packets lack a timestamp.
    """
    try:
        with av.open(str(path)) as container:
            stream = _video_stream(container, path)
            packets_pts = [packet.pts for packet in container.demux(stream) if packet.size]
            time_base, origin = stream.time_base, stream.start_time
            native_fps = float(stream.average_rate or stream.guessed_rate or DEFAULT_VIDEO_FPS)
            announced, width, height = int(stream.frames), stream.width, stream.height
    except av.FFmpegError as exc:
        raise DecodeError(f"{path}: cannot open video ({exc}); the file is corrupt or not a video") from exc
    if not packets_pts:
        raise DecodeError(f"{path}: no frame could be decoded; the file is corrupt or truncated")
    check_frame_count(path, len(packets_pts), announced)
    if (
        time_base is None
        or any(pts is None for pts in packets_pts)
        or len(set(packets_pts)) < len(packets_pts)
    ):
        raise UnnumberedFrames(f"{path}: its packets carry no (or repeated) timestamps")
    ordered: list[int] = sorted(packets_pts)  # type: ignore[arg-type]
    start = ordered[0] if origin is None else origin
    times = tuple(float((pts - start) * time_base) for pts in ordered)
    return FrameTimeline(times, tuple(float(pts * time_base) for pts in ordered), native_fps, width, height)


def sampled_indices(times: tuple[float, ...] | list[float], fps: float | None) -> list[int]:
    """Indices (presentation order) of the frames PyAV's path samples at `fps` (None: every frame)."""
    clock = TargetClock(fps)
    return [i for i, time in enumerate(times) if clock.take(time)]


# ------------------------------------------------------------------------------------------------ decoding


class TorchcodecVideo:
    """One video file opened with TorchCodec on `device`: its timeline and decoder. Frames come out uint8 RGB,
    the shorter side resized to `size` if given (on the CPU by the decoder itself, on CUDA by torchvision)."""

    def __init__(
        self,
        path: str | Path,
        *,
        device: str | torch.device = "cpu",
        threads: int = 0,
        size: int | None = None,
    ) -> None:
        require_torchcodec()
        # lazy: TorchCodec is an optional extra (require_torchcodec names the fix when it is missing)
        from torchcodec.decoders import VideoDecoder
        from torchcodec.transforms import Resize

        self.path = Path(path)
        self.device = torch.device(device)
        self.timeline = frame_timeline(self.path)
        width, height = resized_shape(self.timeline.width, self.timeline.height, size)
        self.out_size = None if size is None else (height, width)
        on_cpu = self.device.type == "cpu"
        transforms = [Resize(self.out_size)] if self.out_size is not None and on_cpu else None
        try:
            self.decoder = VideoDecoder(
                str(self.path),
                device=str(self.device),
                num_ffmpeg_threads=threads,
                dimension_order="NHWC",
                seek_mode="exact",
                transforms=transforms,
            )
        except (RuntimeError, ValueError, OSError) as exc:
            raise DecodeError(
                f"{self.path}: TorchCodec cannot open the video ({_short(exc)}); the file is corrupt or "
                "not a video, or its codec is not in this FFmpeg"
            ) from exc
        if len(self.decoder) != len(self.timeline.times):
            raise UnnumberedFrames(
                f"{self.path}: TorchCodec counts {len(self.decoder)} frames where the packets hold "
                f"{len(self.timeline.times)}"
            )
        self._resize_here = self.out_size is not None and not on_cpu
        full = self.timeline.width * self.timeline.height
        frame_bytes = 3 * (width * height if on_cpu else full)  # CUDA decodes full frames, then resizes
        self.batch = max(1, min(MAX_BATCH, BATCH_BYTES // max(1, frame_bytes)))
        self.n_decoded = 0

    @property
    def native_fps(self) -> float:
        """The stream's frame rate (the container's), as `probe` reports it."""
        return self.timeline.native_fps

    def frames(self, fps: float | None) -> Iterator[tuple[float, torch.Tensor]]:
        """(time, uint8 [H, W, 3] RGB frame on the device; not resized on CUDA) of each frame sampled at
        `fps`."""
        for index in sampled_indices(self.timeline.times, fps):
            yield self.timeline.times[index], self._frame_at(index)

    def batches(self, fps: float | None) -> Iterator[tuple[list[float], torch.Tensor]]:
        """(times, uint8 RGB frames [n, 3, H, W] on the device) of the frames sampled at `fps`, in order, at
        most `self.batch` at a time; on CUDA resized there."""
        times: list[float] = []
        images: list[torch.Tensor] = []
        for time, image in self.frames(fps):
            times.append(time)
            images.append(image)
            if len(images) == self.batch:
                yield times, self._stack(images)
                times, images = [], []
        if images:
            yield times, self._stack(images)

    def frame(self, index: int) -> np.ndarray:
        """Frame `index` (presentation order) as uint8 HWC RGB on the host (the clip path)."""
        image = self._frame_at(index)
        if self._resize_here:
            image = self._stack([image])[0].permute(1, 2, 0)
        return image.cpu().numpy()

    def _stack(self, images: list[torch.Tensor]) -> torch.Tensor:
        """HWC frames -> one [n, 3, H, W] batch, resized here on CUDA (bilinear, antialiased)."""
        batch = torch.stack(images).permute(0, 3, 1, 2)
        if self._resize_here:
            mode = InterpolationMode.BILINEAR
            batch = tvf.resize(batch, list(self.out_size), interpolation=mode, antialias=True)
        return batch

    def _frame_at(self, index: int) -> torch.Tensor:
        """uint8 [H, W, 3] frame `index` on the device, its time checked against the timeline's.

        One `get_frame_at` per frame: TorchCodec 0.17's batch calls (`get_frames_at`, `get_frames_in_range`)
        convert into rows of a preallocated batch about 10x slower on the CPU (measured: 200 854x480 frames
        1.6 s vs 0.17 s); frames asked for in order never seek back.
        """
        try:
            frame = self.decoder.get_frame_at(index)
        except (RuntimeError, IndexError, ValueError) as exc:
            raise DecodeError(
                f"{self.path}: decoding failed after {self.n_decoded} frames ({_short(exc)}); the file "
                "is corrupt or truncated"
            ) from exc
        wanted = self.timeline.pts_seconds[index]
        if abs(frame.pts_seconds - wanted) > TIME_TOLERANCE:
            raise DecodeError(
                f"{self.path}: TorchCodec returned the frame at {frame.pts_seconds:.6f} s for the one at "
                f"{wanted:.6f} s (frames timed unlike their packets); decode it with --decoder pyav"
            )
        self.n_decoded += 1
        data = frame.data
        if data.device != self.device:  # NVDEC fell back to the CPU for this stream
            data = data.to(self.device)
        return data


def decode_batches(
    path: str | Path,
    fps: float | None,
    size: int | None = None,
    *,
    device: str | torch.device = "cpu",
    threads: int = 0,
) -> Iterator[tuple[list[float], torch.Tensor]]:
    """(times, uint8 RGB [n, 3, H, W] on `device`) of the frames `read_frames(path, fps, size)` samples, a few
    at a time; the frames stay on `device` (NVDEC on CUDA: no host round trip). Opens the file at once."""
    return TorchcodecVideo(path, device=device, threads=threads, size=size).batches(fps)


def read_frames(
    path: str | Path, fps: float | None = None, size: int | None = None, *, threads: int = 0
) -> Iterator[DecodedFrame]:
    """`plstitch_eval.data.video.read_frames` of a video file, decoded by TorchCodec on the CPU; opens the
    file at once (so a caller can fall back to another decoder before any frame)."""
    return _host_frames(TorchcodecVideo(path, threads=threads, size=size).frames(fps))


def _host_frames(frames: Iterator[tuple[float, torch.Tensor]]) -> Iterator[DecodedFrame]:
    """Numbered `DecodedFrame`s of CPU frames (numpy views of TorchCodec's tensors, no copy)."""
    for n_out, (time, image) in enumerate(frames):
        yield DecodedFrame(n_out, time, image.numpy())


def video_frames(
    path: str | Path, size: int | None = None, *, threads: int = 0
) -> tuple[float, Iterator[tuple[float, Callable[[], np.ndarray]]]]:
    """(native fps, (time, loader of its HWC RGB pixels) of every frame in presentation order): the frames
    `video.assemble_clips` builds windows from; only loaded frames are decoded to RGB (CPU)."""
    video = TorchcodecVideo(path, threads=threads, size=size)

    def frames() -> Iterator[tuple[float, Callable[[], Any]]]:
        for index, time in enumerate(video.timeline.times):
            yield time, (lambda index=index: video.frame(index))

    return video.native_fps, frames()
