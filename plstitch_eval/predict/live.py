"""Live sources for `predict --online`: a network stream (`rtsp://`, `rtmp://`, `srt://`, `udp://`, `tcp://`,
`http(s)://` HLS, ...) or a capture device (`/dev/videoN`, any FFmpeg input format with `--input-format`).

PyAV opens the source with low-delay options (`LOW_DELAY`; RTSP over TCP) and a thread decodes it, keeping
only the newest sampled frame: a model slower than the stream drops frames (counted) instead of falling
ever further behind (PyAV #956). Frames are sampled at the probe's fps by the stream's own timestamps (as a
file is), or by the wall clock when it has none (`LiveReader.clock`). Nothing arriving for the connect
timeout ends the connection; a dropped stream is reopened for up to the reconnect timeout (gaps recorded).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av

from plstitch_eval.data.sampling import TargetClock
from plstitch_eval.data.video import DecodedFrame, _frame_to_rgb
from plstitch_eval.errors import ConfigError, DecodeError

LIVE_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "srt", "udp", "rtp", "tcp", "http", "https")
# FFmpeg options a live source is opened with unless --input-option says otherwise: no probe buffer (fflags),
# the decoder's low-delay mode (flags) and a minimal probe, so that the first frame comes within a GOP
LOW_DELAY = {"fflags": "nobuffer", "flags": "low_delay", "probesize": "32", "analyzeduration": "0"}
RTSP_DEFAULTS = {"rtsp_transport": "tcp"}  # RTSP over TCP: no lost UDP packets (smeared frames)
DEVICE_FORMAT = "v4l2"  # /dev/videoN: a V4L2 capture device (capture cards, USB grabbers)
CONNECT_TIMEOUT_S = 10.0  # --connect-timeout: nothing for this long ends the connection
RECONNECT_TIMEOUT_S = 0.0  # --reconnect-timeout: how long a dropped stream is reopened for (0: not)
RETRY_S = 0.2  # between two attempts to open a source that refused
END_OF_STREAM = "end of stream"  # the sender closed the stream
STREAM_CLOCK, WALL_CLOCK = "stream", "wall"  # how a live source's frame times were measured


def is_live(video: str, input_format: str | None = None) -> bool:
    """Whether a VIDEO argument names a live source: a URL of a streaming protocol, a /dev/video device,
    or anything given with --input-format."""
    if input_format is not None:
        return True
    scheme = video.split("://", 1)[0].lower() if "://" in video else ""
    return scheme in LIVE_SCHEMES or re.fullmatch(r"/dev/video\d+", video) is not None


def live_name(address: str) -> str:
    """A file-name-safe name for a live source's outputs: `udp://127.0.0.1:5000` -> `udp-127.0.0.1-5000`."""
    if address.startswith("/dev/"):
        return Path(address).name
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", address.split("?", 1)[0]).strip("-.")
    return name or "live"


def parse_input_options(items: Sequence[str]) -> dict[str, str]:
    """`--input-option KEY=VALUE` items as a dict (one line naming a malformed one)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(
                f"--input-option {item!r} is not KEY=VALUE; e.g. --input-option rtsp_transport=udp."
            )
        out[key.strip()] = value
    return out


@dataclass(frozen=True)
class LiveSource:
    """How to open one live source: its address, FFmpeg input format (None: from the address), the options
    given by the user (over the low-delay defaults) and the two timeouts (seconds)."""

    address: str
    input_format: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = CONNECT_TIMEOUT_S
    reconnect_timeout: float = RECONNECT_TIMEOUT_S

    def __post_init__(self) -> None:
        if not self.connect_timeout > 0:
            raise ConfigError(f"--connect-timeout must be > 0 seconds, got {self.connect_timeout}.")
        if not self.reconnect_timeout >= 0:
            raise ConfigError(
                "--reconnect-timeout must be >= 0 seconds (0: do not reconnect), got "
                f"{self.reconnect_timeout}."
            )

    @property
    def format(self) -> str | None:
        """FFmpeg's input format: as given, `v4l2` for /dev/videoN, else guessed from the stream."""
        if self.input_format is None and self.address.startswith("/dev/video"):
            return DEVICE_FORMAT
        return self.input_format

    def av_options(self) -> dict[str, str]:
        """The options PyAV opens the source with: `LOW_DELAY` (and RTSP over TCP), then the user's."""
        options = dict(LOW_DELAY)
        if self.address.lower().startswith(("rtsp://", "rtsps://")):
            options.update(RTSP_DEFAULTS)
        options.update(self.options)
        return options

    def record(self) -> dict[str, Any]:
        """What the results JSON says about how the source was opened."""
        return {
            "address": self.address,
            "input_format": self.format,
            "options": self.av_options(),
            "connect_timeout_s": self.connect_timeout,
            "reconnect_timeout_s": self.reconnect_timeout,
        }


@dataclass(frozen=True)
class Captured:
    """A sampled frame as the reader handed it over: the frame, when it was decoded (`captured`:
    perf_counter; `captured_at`: Unix time) and the frames dropped so far."""

    frame: DecodedFrame
    captured: float
    captured_at: float
    dropped: int = 0


class _NotOpened(Exception):
    """A source that could not be opened within the time given (the last FFmpeg error, if any)."""


class LiveReader:
    """Decodes a live source in a thread; `samples(stop)` yields the newest sampled frame each time the
    consumer asks (the ones it had no time for are `dropped`).

    `due`: frames sampled at the probe's fps; `clock`: how their times were measured (`STREAM_CLOCK`,
    `WALL_CLOCK`); `gaps`: reconnections; `ended`: how the stream ended.
    """

    def __init__(self, source: LiveSource, fps: float | None, size: int | None = None) -> None:
        self.source, self.size = source, size
        self.target = TargetClock(fps)
        self.due = self.dropped = 0
        self.clock: str | None = None
        self.gaps: list[dict[str, float | str]] = []
        self.ended: str | None = None
        self._cond = threading.Condition()
        self._slot: Captured | None = None
        self._finished = False
        self._closing = False
        self._error: BaseException | None = None
        self._origin: int | None = None  # pts of time `_base` in this connection
        self._base = 0.0
        self._wall_origin: float | None = None
        self._last_time: float | None = None
        self._last_capture: float | None = None  # perf_counter of the last decoded frame
        self._lost: tuple[str, float] | None = None  # (cause, last time) of a drop not yet bridged
        self._thread = threading.Thread(target=self._run, name=f"live {source.address}", daemon=True)

    # ----------------------------------------------------------------------------------------- consumer side

    def samples(self, stop: Any) -> Iterator[Captured]:
        """The newest sampled frame whenever there is one, until the stream ends or `stop.requested`;
        raises the reader's `DecodeError` (a source that never connected)."""
        if not self._thread.is_alive() and not self._finished:
            self._thread.start()
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(
                        lambda: self._slot is not None or self._finished or stop.requested, timeout=0.1
                    )
                    taken, self._slot = self._slot, None
                    finished = self._finished
                if taken is not None:
                    yield taken
                elif finished or stop.requested:
                    break
            if self._error is not None:
                raise self._error
        finally:
            self.close()

    def close(self) -> None:
        """Ask the thread to stop; it closes the source at its next frame (or when its read times out)."""
        self._closing = True
        self._thread.join(timeout=0.5)

    def record(self) -> dict[str, Any]:
        """The results JSON's `live` entry: how the source was opened and what the reader saw."""
        return {
            **self.source.record(),
            "clock": self.clock,
            "due": self.due,
            "dropped": self.dropped,
            "kept_up": round(1.0 - self.dropped / self.due, 6) if self.due else None,
            "gaps": list(self.gaps),
        }

    # ------------------------------------------------------------------------------------------- reader side

    def _run(self) -> None:
        try:
            self._read()
        except BaseException as exc:  # handed to the consumer
            self._error = exc
        finally:
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def _read(self) -> None:
        timeout = self.source.connect_timeout
        try:
            container = self._open(timeout)
        except _NotOpened as exc:
            raise DecodeError(self._never_connected(exc)) from None
        while container is not None:
            cause = self._decode(container)
            container.close()
            if self._closing:
                return
            if self._last_time is None:  # opened, but not one frame came
                raise DecodeError(self._never_connected(_NotOpened(cause)))
            if self.source.reconnect_timeout <= 0:
                self.ended = cause
                return
            self._lost = (cause, self._last_time)
            try:
                container = self._open(self.source.reconnect_timeout)
            except _NotOpened:
                self.ended = f"{cause}; not back within {self.source.reconnect_timeout:g} s"
                return
            self._origin = None  # times go on from the last one plus the wall-clock gap

    def _never_connected(self, exc: Exception) -> str:
        why = f" ({exc.args[0]})" if exc.args and exc.args[0] else ""
        return (
            f"{self.source.address}: nothing arrived within --connect-timeout "
            f"{self.source.connect_timeout:g} s{why}; check the address and that the sender is running."
        )

    def _open(self, within: float) -> av.container.InputContainer:
        """The source opened, retried until `within` seconds have passed (a sender not up yet refuses)."""
        deadline = time.monotonic() + within
        last: str | None = None
        while not self._closing:
            left = deadline - time.monotonic()
            try:
                # measured with PyAV 18: opening takes up to twice the open timeout, so half is given
                return av.open(
                    self.source.address,
                    format=self.source.format,
                    options=self.source.av_options(),
                    timeout=(max(left / 2, 0.05), self.source.connect_timeout),
                )
            except av.FFmpegError as exc:
                last = f"{type(exc).__name__}: {exc.strerror or exc}"
            if time.monotonic() + RETRY_S >= deadline:
                break
            time.sleep(RETRY_S)
        raise _NotOpened(last)

    def _decode(self, container: av.container.InputContainer) -> str:
        """Decode one connection until it ends; returns why it ended."""
        if not container.streams.video:
            raise DecodeError(f"{self.source.address}: the stream holds no video.")
        stream = container.streams.video[0]
        stream.thread_count = 1  # FFmpeg's frame threads would hold frames back
        timeout, opened = self.source.connect_timeout, time.perf_counter()
        try:
            for frame in container.decode(stream):
                if self._closing:
                    return "closed"
                self._take(frame, stream)
        except av.FFmpegError as exc:
            # the read timeout interrupts FFmpeg, which says so (ExitError) or, mid-packet, that the data
            # is invalid: a silence as long as the timeout is the timeout
            last = self._last_capture if self._last_capture is not None else opened
            if isinstance(exc, av.ExitError) or time.perf_counter() - last >= 0.9 * timeout:
                return f"nothing arrived for {timeout:g} s"
            return f"the stream failed ({exc.strerror or exc})"
        return END_OF_STREAM

    def _take(self, frame: av.VideoFrame, stream: av.VideoStream) -> None:
        captured, captured_at = time.perf_counter(), time.time()
        time_s = self._time_of(frame, stream, captured_at)
        if self._lost is not None:
            cause, after = self._lost
            seconds = captured - (self._last_capture or captured)
            self.gaps.append({"after_s": round(after, 6), "seconds": round(seconds, 3), "cause": cause})
            self._lost = None
        self._last_time, self._last_capture = time_s, captured
        if not self.target.take(time_s):
            return
        index = self.due
        self.due += 1
        image = _frame_to_rgb(frame, self.size, Path(self.source.address))
        with self._cond:
            if self._slot is not None:
                self.dropped += 1
            self._slot = Captured(DecodedFrame(index, time_s, image), captured, captured_at, self.dropped)
            self._cond.notify_all()

    def _time_of(self, frame: av.VideoFrame, stream: av.VideoStream, now: float) -> float:
        """Seconds since the stream began: by its timestamps (from its start time, so a stream sent from
        its start has a file's times), else by the wall clock; after a reconnection, the last time plus the
        wall-clock gap."""
        if self.clock is None:
            has_pts = frame.pts is not None and stream.time_base is not None
            self.clock = STREAM_CLOCK if has_pts else WALL_CLOCK
        if self.clock == WALL_CLOCK or frame.pts is None or stream.time_base is None:
            if self._wall_origin is None:
                self._wall_origin = now
            return now - self._wall_origin
        if self._origin is None:
            if self._last_time is None:  # first connection
                start = stream.start_time
                self._origin = frame.pts if start is None or start > frame.pts else start
                self._base = 0.0
            else:
                self._origin = frame.pts
                self._base = self._last_time + max(time.perf_counter() - (self._last_capture or 0.0), 0.0)
        return self._base + float((frame.pts - self._origin) * stream.time_base)
