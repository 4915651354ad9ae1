"""The sampling rule every decoder shares, and the clip windows built on it.

Sampling rule: target times are ``0, 1/fps, 2/fps, ...`` seconds after the first frame; for each target we
take the first frame whose presentation time is ``>= target`` (with a 1 microsecond tolerance). A frame that
satisfies several targets (a gap in a variable-frame-rate video) is taken once and the targets it covers are
skipped (`TargetClock`).

Clip encoders see a window of frames around each sampled frame (`ClipSampling`): window frame k of the frame
sampled for target time ``T`` is the first frame at or after ``T + (k - anchor) * step`` (the same rule), the
first frame when that time is before the video and the last frame when it is past its end. `assemble_clips`
builds the windows from frames in decoding order, whichever decoder gives them: only frames some window uses
are converted, each once, and kept until no later window needs them.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError

TIME_TOLERANCE = 1e-6  # seconds; absorbs float rounding of pts * time_base against k / fps


class TargetClock:
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


def assemble_clips(
    frames: Iterable[tuple[float, Callable[[], np.ndarray]]],
    fps: float,
    clip: ClipSampling,
    native_fps: float,
    prepare: Callable[[np.ndarray], Any] | None = None,
) -> Iterator[DecodedClip]:
    """The windows of `read_clips` from (time, loader of its RGB pixels) of every frame in presentation order,
    whichever decoder gives them; a frame is loaded only if some window uses it."""
    assembler = WindowAssembler(clip, fps, clip.step(native_fps), prepare or (lambda image: image))
    for time, load in frames:
        yield from assembler.push(time, load)
    yield from assembler.finish()


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


class WindowAssembler:
    """Turns frames pushed in decoding order into the windows of the sampled frames (see above).

    Window times of target m are T_m + (k - anchor) * step with T_m = m / fps, the targets of `TargetClock`.
    A frame is prepared only if it is the first frame at or after some window time (the first frame stands
    in for every time before it), and kept only while a window not yet opened may still need it. Public for
    a pass that feeds one decoded stream to several consumers (`plstitch_eval.extract.shared`).
    """

    def __init__(self, clip: ClipSampling, fps: float, step: float, prepare: Callable[[np.ndarray], Any]):
        anchor = int(clip.anchor or 0)
        self.offsets = tuple((k - anchor) * step for k in range(clip.num_frames))
        self.clock = TargetClock(fps)
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
