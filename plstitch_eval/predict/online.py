"""Online prediction: frames decoded one at a time from a file or a pipe, each encoded and classified as soon
as it is decoded; a causal probe only (its output at t may use frames <= t).

A framewise probe (linear) looks at the new frame alone; any other causal probe is run again on the growing
prefix (output at t is then the offline output at t; cost O(t) per frame, O(T^2) per video).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

import av
import numpy as np

from plstitch_eval.data.decoders import PYAV, Decoding, read_frames
from plstitch_eval.data.margin import detect_video_margin
from plstitch_eval.data.sampling import TargetClock
from plstitch_eval.data.video import (
    DEFAULT_VIDEO_FPS,
    DecodedFrame,
    _frame_to_rgb,
    _video_stream,
)
from plstitch_eval.errors import ConfigError, DecodeError
from plstitch_eval.predict.encoder import ProbeEncoder
from plstitch_eval.predict.outputs import VideoPrediction
from plstitch_eval.predict.sources import STDIN_NAME, VideoSource
from plstitch_eval.preprocess import FramePlan, prepare_frame
from plstitch_eval.probes import Probe

PIPE_HINT = (
    "pipe a streamable container (MPEG-TS or Matroska, e.g. ffmpeg ... -f mpegts -); an MP4 keeps its "
    "index at its end, so pass it as a file"
)
FRAMEWISE_KINDS = ("linear",)  # probe kinds whose output at t depends on frame t alone


@dataclass(frozen=True)
class OnlineUpdate:
    """The prediction once per video second: time, sample number, class, its probability and the latency
    (wall time from the decoder handing the frame over to its prediction).

    No progression here: it is min-max normalised over the whole video (over a prefix the newest frame
    would always look the latest), so only the CSV written when the video ends holds it.
    """

    video: str
    time_s: float
    frame_index: int
    phase: str
    probability: float
    latency_s: float

    def line(self, with_video: bool = False) -> str:
        """`   12.0 s  Phase  p=0.83  latency=3.2 ms` (the video's name first when asked)."""
        video = f"{self.video}  " if with_video else ""
        return (
            f"{video}{self.time_s:7.1f} s  {self.phase}  p={self.probability:.2f}  "
            f"latency={self.latency_s * 1000:.1f} ms"
        )


def read_stream(file: IO[bytes], fps: float, size: int | None = None, name: str = STDIN_NAME):
    """Frames of a video container read from a file object (a pipe), sampled at `fps` by the same rule and
    clock as `read_frames`, as they are decoded (no packet pre-pass: a pipe is read once).

    Decoding is single-threaded: FFmpeg's frame threads would hold frames back (latency).
    """
    label = Path(f"<{name}>")
    try:
        container = av.open(file)
    except av.FFmpegError as exc:
        raise DecodeError(f"{name}: cannot open the stream ({exc}); {PIPE_HINT}.") from exc
    with container:
        stream = _video_stream(container, label)
        stream.thread_count = 1
        origin = stream.start_time
        rate = float(stream.average_rate or stream.guessed_rate or DEFAULT_VIDEO_FPS)
        clock = TargetClock(fps)
        n_out = n_decoded = 0
        last_time: float | None = None
        try:
            for frame in container.decode(stream):
                if frame.pts is None or stream.time_base is None:
                    time_s = (last_time + 1.0 / rate) if last_time is not None else 0.0
                else:
                    origin = frame.pts if origin is None else origin
                    time_s = float((frame.pts - origin) * stream.time_base)
                last_time = time_s
                n_decoded += 1
                if clock.take(time_s):
                    yield DecodedFrame(n_out, time_s, _frame_to_rgb(frame, size, label))
                    n_out += 1
        except av.FFmpegError as exc:
            hint = PIPE_HINT if n_decoded == 0 else "the stream is corrupt or was cut"
            raise DecodeError(f"{name}: decoding failed after {n_decoded} frames ({exc}); {hint}.") from exc
        if n_decoded == 0:
            raise DecodeError(f"{name}: no frame could be decoded; {PIPE_HINT}.")


def stdin_binary() -> IO[bytes]:
    """Standard input as unbuffered bytes, so frames are decoded as soon as they arrive."""
    buffer = getattr(sys.stdin, "buffer", sys.stdin)
    return getattr(buffer, "raw", buffer)


class _OnlineState:
    """Features and outputs of the frames decoded so far; the probe's output for the newest frame."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe
        self.framewise = probe.kind in FRAMEWISE_KINDS
        self.features: list[np.ndarray] = []
        self.probabilities: list[np.ndarray] = []
        self.predicted: list[int] = []

    def push(self, feature: np.ndarray) -> None:
        """Add frame t's feature and compute the probe's output at t (the new frame alone for a framewise
        probe; else the whole prefix, whose last row a causal probe gives exactly as offline)."""
        self.features.append(feature)
        window = feature[None] if self.framewise else np.stack(self.features)
        logits = self.probe.logits(window)
        self.probabilities.append(self.probe.probabilities(window)[-1])
        self.predicted.append(int(logits[-1].argmax()))


def online_plan(plan: FramePlan, source: VideoSource, decoding: Decoding = PYAV) -> FramePlan:
    """The frame plan of one video followed online: with the probe's black-margin crop, the video's own box,
    found on its first 64 s before the first frame is encoded (a pipe cannot be read ahead: refused)."""
    if not plan.crop_black_margin:
        return plan
    if source.source is None:
        raise ConfigError(
            "the probe's features were made with --crop-black-margin, whose box is found on a video's first "
            "64 s before its first frame: a pipe cannot be read ahead; save the stream to a file first."
        )
    box = detect_video_margin(source.source, folder_fps=source.folder_fps, threads=1, decoding=decoding)
    return replace(plan, margin=box)


def predict_online(
    probe: Probe,
    model: ProbeEncoder,
    source: VideoSource,
    emit: Callable[[OnlineUpdate], None],
    stream: IO[bytes] | None = None,
    decoding: Decoding = PYAV,
) -> VideoPrediction:
    """Follow one video as it decodes: encode each sampled frame at once, run the causal probe, `emit` an
    update at the first frame of every video second (every frame when they are further apart). A file is
    decoded on the CPU by `decoding`'s decoder; a pipe by PyAV."""
    if not probe.causal:
        raise ConfigError(
            f"probe {probe.folder} ({probe.kind}) is not causal: its output at a frame uses later frames, "
            "so it cannot run --online; drop --online to predict whole videos."
        )
    if model.plan.clip is not None:
        raise ConfigError(
            f"{model.spec} is a clip encoder: its window around a frame reaches into later frames, so it "
            "cannot run --online; drop --online."
        )
    plan = online_plan(model.plan, source, decoding)
    size = plan.resize if plan.resize_on_decode else None
    if source.source is None:
        frames = read_stream(stream if stream is not None else stdin_binary(), probe.fps, size)
    else:
        frames = read_frames(
            source.source,
            probe.fps,
            size,
            folder_fps=source.folder_fps,
            threads=1,
            decoding=decoding.on_cpu(),
        )
    state = _OnlineState(probe)
    times: list[float] = []
    started = time.perf_counter()
    last_second: int | None = None
    pin = model.device.type == "cuda"
    for frame in frames:
        decoded_at = time.perf_counter()
        crop = prepare_frame(frame.image, plan)[None]
        feature = model.encode(crop.pin_memory() if pin else crop)[0].cpu().numpy()
        state.push(feature)
        times.append(frame.time)
        second = int(np.floor(frame.time + 1e-6))
        if last_second is not None and second <= last_second:
            continue
        last_second = second
        probs = state.probabilities[-1]
        emit(
            OnlineUpdate(
                video=source.name,
                time_s=frame.time,
                frame_index=frame.index,
                phase=probe.class_names[state.predicted[-1]],
                probability=float(probs[state.predicted[-1]]),
                latency_s=time.perf_counter() - decoded_at,
            )
        )
    features = np.stack(state.features) if state.features else np.zeros((0, 0), np.float32)
    frame_times = np.asarray(times, dtype=np.float64)
    return VideoPrediction(
        video=source.name,
        source=source.shown,
        frame_times=frame_times,
        probabilities=np.stack(state.probabilities) if state.probabilities else np.zeros((0, 0)),
        predicted=np.asarray(state.predicted, dtype=np.int64),
        progression=model.progression(features),
        labels=source.ground_truth(frame_times),
        wall_seconds=time.perf_counter() - started,
    )
