"""Tiny real media for the tests, written through PyAV in one place.

`write_video` writes any tiny video the tests need (H.264 in MP4 by default; another codec or container by
name), its frames given as a list or as a function of the frame index; `write_audio_only` a file with no video
stream; `remux` the same packets into another container (e.g. a streamable one).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

X264_FAST = {"crf": "18", "preset": "ultrafast"}  # libx264's options unless others are given


def write_video(
    path: Path,
    frames: Callable[[int], np.ndarray] | Sequence[np.ndarray],
    n_frames: int | None = None,
    *,
    fps: int | Fraction = 25,
    codec: str = "libx264",
    options: Mapping[str, str] | None = None,
    container_options: Mapping[str, str] | None = None,
    pts_ms: Sequence[int] | None = None,
) -> Path:
    """Write a video of `n_frames` frames (every frame of a sequence by default) and return its path.

    `frames`: uint8 HxWx3 RGB images, or frame i as `frames(i)`; the first one sets the size (even sides, as
    yuv420p needs). `fps` may be a Fraction (NTSC rates such as 30000/1001); `pts_ms` gives each frame's time
    in milliseconds instead (variable frame rate). `codec` picks the encoder and, with the file's extension,
    the container; `options` are the encoder's (default `X264_FAST` for libx264, none for another codec),
    `container_options` the muxer's (e.g. {"movflags": "faststart"}).
    """
    image_at = frames if callable(frames) else frames.__getitem__
    count = len(frames) if n_frames is None and not callable(frames) else n_frames
    if count is None:
        raise ValueError("write_video needs n_frames when frames is a function")
    if options is None:
        options = X264_FAST if codec == "libx264" else {}
    height, width = image_at(0).shape[:2]
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), mode="w", options=dict(container_options or {})) as container:
        stream = container.add_stream(codec, rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        if options:
            stream.options = dict(options)
        if pts_ms is not None:
            stream.codec_context.time_base = Fraction(1, 1000)
        for i in range(count):
            frame = av.VideoFrame.from_ndarray(image_at(i), format="rgb24")
            if pts_ms is not None:
                frame.pts, frame.time_base = pts_ms[i], Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def write_audio_only(path: Path, sample_rate: int = 8000) -> Path:
    """A container holding one AAC audio stream (1024 silent samples) and no video stream."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("aac", rate=sample_rate)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
        frame.sample_rate = sample_rate
        container.mux([*stream.encode(frame), *stream.encode()])
    return path


def remux(source: Path, target: Path, fmt: str = "matroska") -> Path:
    """The same video packets as `source` in a container of format `fmt` (no re-encoding)."""
    with av.open(str(source)) as src, av.open(str(target), "w", format=fmt) as dst:
        stream = src.streams.video[0]
        out = dst.add_stream_from_template(stream)
        for packet in src.demux(stream):
            if packet.dts is not None:
                packet.stream = out
                dst.mux(packet)
    return target
