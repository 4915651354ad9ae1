"""Online prediction: frames decoded one at a time from a file or a pipe, each encoded and classified as soon
as it is decoded; a causal probe only (its output at t may use frames <= t).

A framewise probe (linear) looks at the new frame alone; any other causal probe is run again on the growing
prefix (output at t is then the offline output at t; cost O(t) per frame, O(T^2) per video).

A recording still being written is followed (`follows`): at the end of the file the reader waits for more
bytes until none came for `follow_s` seconds. Ctrl-C or SIGTERM ends the video where it is (`StopRequest`), so
that what was seen is kept; each prediction says how its video ended (`VideoPrediction.ended`).
"""

from __future__ import annotations

import io
import os
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import IO, Any

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
from plstitch_eval.predict.backbones import as_encoders
from plstitch_eval.predict.case import CaseHeads, CasePrediction, online_heads, online_prediction
from plstitch_eval.predict.encoder import ProbeEncoder
from plstitch_eval.predict.heads import OnlineHead
from plstitch_eval.predict.live import Captured, LiveReader
from plstitch_eval.predict.live_margin import live_margin
from plstitch_eval.predict.out_console import OnlineUpdate, SecondLines
from plstitch_eval.predict.outputs import VideoPrediction
from plstitch_eval.predict.pipeline import Callbacks, FrameSink, Outputs, PredictedFrame
from plstitch_eval.predict.probeset import ProbeSet, as_probe_set
from plstitch_eval.predict.sources import STDIN_NAME, VideoSource
from plstitch_eval.preprocess import FramePlan, prepare_frame
from plstitch_eval.probes import Probe

PIPE_HINT = (
    "pipe a streamable container (MPEG-TS or Matroska, e.g. ffmpeg ... -f mpegts -); an MP4 keeps its "
    "index at its end, so pass it as a file"
)
FRAMEWISE_KINDS = ("linear",)  # probe kinds whose output at t depends on frame t alone
# FFmpeg's names of the containers it reads front to back as they are written (no index at the end, unlike
# MP4): a recording in one of them can be followed while it grows
FOLLOWED_FORMATS = frozenset({"mpegts", "matroska,webm", "flv", "nut", "mpeg", "h264", "hevc"})
POLL_S = 0.1  # while nothing new came: how often a followed file or a pipe is looked at again (and Ctrl-C)
END_OF_RECORDING = "end of recording"  # a pipe closed by its writer, or a file read to its end unfollowed
INTERRUPTED = "interrupted"  # Ctrl-C (SIGINT)
TERMINATED = "terminated"  # SIGTERM: a service manager, `timeout`, `kill`
STOPPED = {signal.SIGINT: INTERRUPTED, signal.SIGTERM: TERMINATED}  # the signals that end a run, and how


def quiet_for(follow_s: float) -> str:
    """How a followed file ended when no byte came for `follow_s` seconds: `quiet for 10 s`."""
    return f"quiet for {follow_s:g} s"


class StopNow(KeyboardInterrupt):
    """A second stop signal: stop at once, where the run is. `signum` says which signal (the exit code is
    128 + it: 130 for SIGINT, 143 for SIGTERM); a KeyboardInterrupt, so `except Exception` never swallows it.
    """

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__()
        self.signum = int(signum)


class StopRequest:
    """Ctrl-C or SIGTERM while predicting online: the signal sets `requested` (and `signum`), which the reader
    and the frame loop look at, so that the video ends where it is and what was seen is written; a second
    signal stops at once (`StopNow`).

    Why a flag: PyAV reads a Python file object in a callback that swallows any exception raised in it,
    KeyboardInterrupt included (`Exception ignored in: 'av.container.pyio.pyio_read_gil'`), and decoding
    would go on. SIGTERM (a service manager stopping predict, `timeout`) would kill the process and lose the
    video in hand. Installed (as a context manager) only in the main thread; elsewhere `requested` is set by
    hand (then it reads as a Ctrl-C).
    """

    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None  # the signal that asked to stop (None: asked by hand)
        self._previous: dict[int, Callable | int | None] = {}

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in STOPPED:
                self._previous[signum] = signal.signal(signum, self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if previous is None else previous)  # None: not Python's
        self._previous.clear()

    def handle(self, signum: int, frame: object = None) -> None:
        """Signal handler: the first SIGINT/SIGTERM asks to stop, a second raises `StopNow`."""
        if self.requested:
            raise StopNow(signum)
        self.requested = True
        self.signum = int(signum)

    @property
    def reason(self) -> str:
        """How a stop ends the video: `TERMINATED` for SIGTERM, else `INTERRUPTED` (Ctrl-C, or by hand)."""
        return TERMINATED if self.signum == signal.SIGTERM else INTERRUPTED


class PolledReader:
    """A byte stream PyAV reads through `read` alone (no `seek`: front to back, once, as a pipe), looked at
    again every `poll_s` while nothing new came, so that Ctrl-C (`stop`) ends it within `poll_s`.

    With `follow_s` > 0 (a file still being written) the end of the file is not the end: `read` waits for
    more bytes until the file has been quiet for `follow_s` seconds (no byte written: its mtime, and the time
    waited here). `ended` says why the stream ended (`END_OF_RECORDING`, `quiet_for`, `INTERRUPTED`,
    `TERMINATED`).
    """

    def __init__(
        self, file: IO[bytes], stop: StopRequest, follow_s: float = 0.0, poll_s: float = POLL_S
    ) -> None:
        self.file, self.stop, self.follow_s, self.poll_s = file, stop, follow_s, poll_s
        self.ended: str | None = None
        try:
            fd: int | None = file.fileno()
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            fd = None  # an in-memory stream: always ready
        self._fd = fd
        self._polled = fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode)  # a pipe, a socket

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes as soon as there are some; b"" once the stream has ended (see `ended`)."""
        try:
            data = self._read(size)
        except KeyboardInterrupt:  # a second Ctrl-C or SIGTERM: PyAV's read callback would swallow it
            self.stop.requested = True
            data = b""
        if not data and (self.stop.requested or self.ended is None):
            self.ended = self.stop.reason if self.stop.requested else END_OF_RECORDING
        return data

    def _read(self, size: int) -> bytes:
        waiting_since: float | None = None
        while self.ended is None and not self.stop.requested:
            if self._polled and not self._ready():
                continue
            data = self.file.read(size)
            if data is None:  # a non-blocking stream with nothing to read yet
                time.sleep(self.poll_s)
                continue
            if data or self.follow_s <= 0:
                return data
            waiting_since = time.monotonic() if waiting_since is None else waiting_since
            quiet = max(time.monotonic() - waiting_since, self._quiet_on_disk())
            if quiet >= self.follow_s:
                self.ended = quiet_for(self.follow_s)
                return b""
            time.sleep(min(self.poll_s, self.follow_s - quiet))
        return b""

    def _ready(self) -> bool:
        """Whether the pipe has bytes (or its end) within `poll_s`; True where it cannot be polled."""
        try:
            return bool(select.select([self._fd], [], [], self.poll_s)[0])
        except (OSError, ValueError):  # e.g. a pipe on Windows: read it blocking
            self._polled = False
            return True

    def _quiet_on_disk(self) -> float:
        """Seconds since the file was last written (0 when that cannot be told)."""
        if self._fd is None:
            return 0.0
        return time.time() - os.fstat(self._fd).st_mtime


def container_format(path: Path) -> str | None:
    """FFmpeg's name of a file's container (`mpegts`, `matroska,webm`, `mov,mp4,m4a,3gp,3g2,mj2`, ...); None
    when FFmpeg cannot open it."""
    try:
        with av.open(str(path)) as container:
            return container.format.name
    except av.FFmpegError:
        return None


def follows(path: Path | None, follow_s: float) -> bool:
    """Whether a video file is followed as a recording still being written: `follow_s` > 0, written to in the
    last `follow_s` seconds, in a container FFmpeg reads as it is written (`FOLLOWED_FORMATS`).

    Why both: a file quiet for longer has ended by the rule that ends a followed one, so a finished file is
    read to its end at once; an MP4 cannot be read before its index, which is written last.
    """
    if path is None or follow_s <= 0 or not path.is_file():
        return False
    if time.time() - path.stat().st_mtime >= follow_s:
        return False
    return container_format(path) in FOLLOWED_FORMATS


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


def online_plan(plan: FramePlan, source: VideoSource, decoding: Decoding = PYAV) -> FramePlan:
    """The frame plan of one video followed online: with the probe's black-margin crop, the video's own box,
    found on its first 64 s before the first frame is encoded (a pipe cannot be read ahead: refused)."""
    if not plan.crop_black_margin or source.live is not None:  # a live source's: `live_margin`
        return plan
    if source.source is None:
        raise ConfigError(
            "the probe's features were made with --crop-black-margin, whose box is found on a video's first "
            "64 s before its first frame: a pipe cannot be read ahead; save the stream to a file first."
        )
    box = detect_video_margin(source.source, folder_fps=source.folder_fps, threads=1, decoding=decoding)
    return replace(plan, margin=box)


def predict_online(
    probe: Probe | ProbeSet,
    model: ProbeEncoder | Sequence[ProbeEncoder],
    source: VideoSource,
    emit: Callable[[OnlineUpdate], None] | None,
    stream: IO[bytes] | None = None,
    decoding: Decoding = PYAV,
    follow_s: float = 0.0,
    stop: StopRequest | None = None,
    on_frame: Callable[[dict[str, Any]], None] | None = None,
    on_image: Callable[[np.ndarray], None] | None = None,
    sink: FrameSink | None = None,
) -> VideoPrediction | CasePrediction:
    """Follow one video as it decodes: encode each sampled frame at once, run the causal probe, and hand
    what each frame predicts (`pipeline.PredictedFrame`) to the outputs: its row to `on_frame` (`--jsonl`),
    its decoded RGB image to `on_image` (`--show-frames`), both to `sink` (opened and closed by its owner),
    and to `emit` an update at the first frame of every video second (every frame when they are further
    apart).

    A file is decoded on the CPU by `decoding`'s decoder, a pipe by PyAV; a file still being written
    (`follows(path, follow_s)`) by PyAV too, waiting at its end until it was quiet for `follow_s` seconds; a
    live source (`source.live`) by a `LiveReader`, which keeps only the newest frame (the others dropped).
    Ctrl-C or SIGTERM (`stop`, installed here when not given) ends the video after the frame in hand; the
    prediction holds the frames seen and says how the video ended (`ended`). Several probes (a `ProbeSet`)
    share each frame's encoder pass, one per backbone (`model`: a list, one encoder per backbone); their
    prediction is a `CasePrediction`.
    """
    probes = as_probe_set(probe)
    probe = probes.first
    models = as_encoders(model, probes)
    model = models[0]
    for i, each in enumerate(probes.probes):
        check_causal(each, models[probes.group(i)])
    with ExitStack() as scope:
        stop = stop if stop is not None else scope.enter_context(StopRequest())
        plan = online_plan(model.plan, source, decoding)
        size = plan.resize if plan.resize_on_decode else None
        reader: PolledReader | None = None
        live: LiveReader | None = None
        if source.live is not None:
            live = LiveReader(source.live, probe.fps, size)
            samples = live.samples(stop)
        elif source.source is None:
            reader = PolledReader(stream if stream is not None else stdin_binary(), stop)
            samples = stamped(read_stream(reader, probe.fps, size))
        elif follows(source.source, follow_s):
            handle = scope.enter_context(source.source.open("rb", buffering=0))
            reader = PolledReader(handle, stop, follow_s)
            samples = stamped(read_stream(reader, probe.fps, size, name=str(source.source)))
        else:
            frames = read_frames(
                source.source,
                probe.fps,
                size,
                folder_fps=source.folder_fps,
                threads=1,
                decoding=decoding.on_cpu(),
            )
            samples = stamped(frames)
        state = online_heads(probes, FRAMEWISE_KINDS)
        started = time.perf_counter()
        margin: dict[str, Any] | None = plan.margin.to_dict() if plan.margin is not None else None
        try:
            if live is not None and plan.crop_black_margin:
                samples, plan, margin = live_margin(samples, plan)
            plans = [plan, *(replace(m.plan, margin=plan.margin) for m in models[1:])]  # one box per video
            outputs = Outputs([Callbacks(on_frame, on_image), sink, SecondLines(emit) if emit else None])
            _follow(samples, state, plans, models, stop, outputs, source.name)
        except DecodeError:
            if not stop.requested:  # Ctrl-C/SIGTERM before a first frame came is no decoding failure
                raise
        ended = stop.reason if stop.requested else None
        if ended is None:
            ended = (live.ended if live else reader.ended if reader else None) or END_OF_RECORDING
    features = np.stack(state.features) if state.features else np.zeros((0, 0), np.float32)
    frame_times = np.asarray(state.times, dtype=np.float64)
    return online_prediction(
        state,
        video=source.name,
        source=source.shown,
        frame_times=frame_times,
        progression=model.progression(features) if len(features) else None,
        labels=source.ground_truth(frame_times),
        wall_seconds=time.perf_counter() - started,
        black_margin=margin,
        ended=ended,
        frame_indices=np.asarray(state.indices, dtype=np.int64),
        live=live.record() if live is not None else None,
    )


def check_causal(probe: Probe, model: ProbeEncoder) -> None:
    """Refuse what cannot run online: a non-causal probe, a clip encoder (both look at later frames)."""
    if not probe.causal:
        raise ConfigError(
            f"probe {probe.folder} ({probe.kind}) is not causal: its output at a frame uses later frames, "
            "so it cannot run --online; save a causal one (plstitch linear --save DIR, or plstitch "
            "temporal --causal --save DIR) or drop --online to predict whole videos."
        )
    if model.plan.clip is not None:
        raise ConfigError(
            f"{model.spec} is a clip encoder: its window around a frame reaches into later frames, so it "
            "cannot run --online; drop --online."
        )


def stamped(frames: Iterator[DecodedFrame]) -> Iterator[Captured]:
    """Frames of a file or pipe as `Captured` samples, stamped when the decoder hands them over (none is
    dropped: the decoder waits for the model). Closes `frames` when done."""
    try:
        for frame in frames:
            yield Captured(frame, time.perf_counter(), time.time())
    finally:
        close = getattr(frames, "close", None)
        if close is not None:
            close()  # a generator's container is closed now, not when collected


def frame_row(
    video: str, state: OnlineHead | CaseHeads, sample: Captured, latency_s: float
) -> dict[str, Any]:
    """One `--jsonl` line: the CSV's fields (time_s, frame_index, then `heads.frame_fields`: predicted and a
    probability per class, or a regression probe's minutes) plus `video`, `captured_at` (Unix time the frame
    was decoded), `latency_s` (decoded to predicted) and `dropped` (frames dropped so far)."""
    row: dict[str, Any] = {
        "video": video,
        "time_s": round(sample.frame.time, 6),
        "frame_index": sample.frame.index,
        **state.newest(),
    }
    row.update(
        captured_at=round(sample.captured_at, 6), latency_s=round(latency_s, 6), dropped=sample.dropped
    )
    return row


def encode_frame(model: ProbeEncoder, plan: FramePlan, image: np.ndarray) -> np.ndarray:
    """One decoded frame's feature: the plan's crop (pinned for a CUDA device), encoded, on the host."""
    crop = prepare_frame(image, plan)[None]
    return model.encode(crop.pin_memory() if model.device.type == "cuda" else crop)[0].cpu().numpy()


def _follow(
    samples: Iterator[Captured],
    state: OnlineHead | CaseHeads,
    plans: Sequence[FramePlan],
    models: Sequence[ProbeEncoder],
    stop: StopRequest,
    outputs: FrameSink,
    video: str,
) -> None:
    """Encode and classify each frame as it comes (into `state`; each backbone's encoder on its own crop of
    the frame), hand what it predicts to the `outputs`; stop after the frame in hand when Ctrl-C asked
    (`stop`)."""
    try:
        for sample in samples:
            frame = sample.frame
            features = [encode_frame(m, plan, frame.image) for m, plan in zip(models, plans, strict=True)]
            state.push(features[0] if len(features) == 1 else features, frame.time, frame.index)
            latency = time.perf_counter() - sample.captured
            outputs.frame(
                PredictedFrame(
                    video,
                    frame.time,
                    frame.index,
                    frame.image,
                    latency,
                    fields=partial(frame_row, video, state, sample, latency),
                    text=state.newest_text,
                )
            )
            if stop.requested:
                break
    finally:
        close = getattr(samples, "close", None)
        if close is not None:
            close()  # the decoder (a generator's container, a live reader) stops now
