"""Live sources for `predict --online`: a network stream (`rtsp://`, `rtmp://`, `srt://`, `udp://`, `tcp://`,
`http(s)://` HLS, ...) or a capture device (`/dev/videoN`, any FFmpeg input format with `--input-format`).

PyAV opens the source with low-delay options (`LOW_DELAY`; RTSP over TCP) that keep the packets read while the
stream is probed, so a stream sent from its start is predicted from its first frame whatever its keyframe
interval. A thread demuxes and decodes it, keeping only the newest sampled frame: a model slower than the
stream drops frames (counted) instead of falling ever further behind (PyAV #956). Frames are sampled at the
probe's fps by the stream's own timestamps (as a file is), or by the wall clock when it has none
(`LiveReader.clock`).

The connect timeout counts to the first packet, then to the first keyframe (a stream joined between two
waits for the next one); later, a silence as long means the stream dropped. A dropped stream is waited for
(and, once its connection closed, reopened) for up to the reconnect timeout: each gap records the real
silence between two packets, and the times after it follow the stream's own clock when it goes on, the wall
clock otherwise.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import av

from plstitch_eval.data.sampling import TargetClock
from plstitch_eval.data.video import DecodedFrame, _frame_to_rgb
from plstitch_eval.errors import ConfigError, DecodeError
from plstitch_eval.predict.record import Recorder

LIVE_SCHEMES = ("rtsp", "rtsps", "rtmp", "rtmps", "srt", "udp", "rtp", "tcp", "http", "https")
# FFmpeg options a live source is opened with unless --input-option says otherwise: the decoder's low-delay
# mode (flags) and a minimal probe. Not fflags=nobuffer: it throws away the packets read while probing, so a
# stream sent from its start would begin at its second keyframe (10 s late for the synthetic set's videos)
LOW_DELAY = {"flags": "low_delay", "probesize": "32", "analyzeduration": "0"}
RTSP_DEFAULTS = {"rtsp_transport": "tcp"}  # RTSP over TCP: no lost UDP packets (smeared frames)
DEVICE_FORMAT = "v4l2"  # /dev/videoN: a V4L2 capture device (capture cards, USB grabbers)
CONNECT_TIMEOUT_S = 10.0  # --connect-timeout: to the first packet, then to the first keyframe; later a drop
RECONNECT_TIMEOUT_S = 0.0  # --reconnect-timeout: how long a dropped stream is waited for or reopened (0: not)
CLOCK_SLACK_S = 1.0  # after a gap, a stream clock further ahead of the wall clock than this has restarted
RETRY_S = 0.2  # between two attempts to open a source that refused
END_OF_STREAM = "end of stream"  # the sender closed the stream
NO_KEYFRAME = "no keyframe yet"  # packets arrived for the connect timeout, none of them a keyframe
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
    given by the user (over the low-delay defaults), the two timeouts (seconds) and where it is recorded."""

    address: str
    input_format: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    connect_timeout: float = CONNECT_TIMEOUT_S
    reconnect_timeout: float = RECONNECT_TIMEOUT_S
    recording: str | None = None  # --record FILE: the stream remuxed into FILE as it arrives (record.py)
    overwrite_recording: bool = False

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
    """A source that could not be opened within the time given; `why` says what FFmpeg said (None: nothing
    came), `unreadable` that data came that FFmpeg cannot read as a stream."""

    def __init__(self, why: str | None = None, unreadable: bool = False) -> None:
        super().__init__(why)
        self.why, self.unreadable = why, unreadable


def silent_for(seconds: float) -> str:
    """How a stream dropped: `nothing arrived for 10 s`."""
    return f"nothing arrived for {seconds:g} s"


class LiveReader:
    """Decodes a live source in a thread; `samples(stop)` yields the newest sampled frame each time the
    consumer asks (the ones it had no time for are `dropped`).

    `due`: frames sampled at the probe's fps; `clock`: how their times were measured (`STREAM_CLOCK`,
    `WALL_CLOCK`); `gaps`: the silences of the stream (`after_s`: the time of the last frame before it,
    `seconds`: from the last packet before it to the first after it, `cause`); `ended`: how the stream ended.
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
        self._origin: Fraction | None = None  # the stream time (s) of time `_base`
        self._base = 0.0
        self._wall_origin: float | None = None
        self._last_time: float | None = None
        self._last_capture: float | None = None  # perf_counter of the last decoded frame
        self._last_packet: float | None = None  # perf_counter of the last packet received
        self._reopened: str | None = None  # why the connection was reopened, until its first packet
        self._resumed = False  # a gap was recorded: is the stream's clock going on? (`_time_of`)
        self._seen = {"packets": 0, "keyframe": False}  # this connection's, before its first picture
        self._decode_error: str | None = None
        # how long a silence is waited through on an open connection (its read timeout): the connect timeout,
        # then the reconnect one
        self._wait = source.connect_timeout + source.reconnect_timeout
        self._thread = threading.Thread(target=self._run, name=f"live {source.address}", daemon=True)
        self.recorder = (
            Recorder(Path(source.recording).expanduser(), source.overwrite_recording)
            if source.recording
            else None
        )

    # ----------------------------------------------------------------------------------------- consumer side

    def samples(self, stop: Any) -> Iterator[Captured]:
        """The newest sampled frame whenever there is one, until the stream ends or `stop.requested`;
        raises the reader's `DecodeError` (a source that never gave a picture)."""
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
        """Ask the thread to stop; it closes the source at its next packet (or when its read times out)."""
        self._closing = True
        if self._thread.ident is not None:  # started
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
            **({"recording": self.recorder.record()} if self.recorder is not None else {}),
        }

    # ------------------------------------------------------------------------------------------- reader side

    def _run(self) -> None:
        try:
            self._read()
        except BaseException as exc:  # handed to the consumer
            self._error = exc
        finally:
            if self.recorder is not None:
                self.recorder.close("stopped" if self._closing else (self.ended or END_OF_STREAM))
            with self._cond:
                self._finished = True
                self._cond.notify_all()

    def _read(self) -> None:
        source = self.source
        try:
            container = self._open(source.connect_timeout)
        except _NotOpened as exc:
            raise DecodeError(self._not_opened(exc)) from None
        while True:
            try:
                cause = self._decode(container)
            finally:
                container.close()
            if self._closing:
                return
            if self._last_time is None:  # opened, but not one picture came
                raise DecodeError(self._no_picture(cause))
            if source.reconnect_timeout <= 0:
                self.ended = cause
                return
            if cause == silent_for(self._wait):  # waited for it already
                self.ended = (
                    f"{silent_for(source.connect_timeout)}; not back within {source.reconnect_timeout:g} s"
                )
                return
            try:
                container = self._open(source.reconnect_timeout)
            except _NotOpened:
                self.ended = f"{cause}; not back within {source.reconnect_timeout:g} s"
                return
            self._reopened = cause

    def _open(self, within: float) -> av.container.InputContainer:
        """The source opened, retried until `within` seconds have passed (a sender not up yet refuses).

        One attempt waits for the whole time left: a UDP socket closed between two attempts would lose what
        the sender sent meanwhile (a stream's first keyframe)."""
        deadline = time.monotonic() + within
        why: str | None = None
        while not self._closing:
            left = deadline - time.monotonic()
            try:
                return av.open(
                    self.source.address,
                    format=self.source.format,
                    options=self.source.av_options(),
                    timeout=(max(left, 0.05), self._wait),
                )
            except av.ExitError:  # the open timeout: nothing came
                why = None
            except av.ConnectionRefusedError:
                why = "the connection was refused"
            except av.InvalidDataError as exc:  # bytes came, but not a stream FFmpeg can read
                raise _NotOpened(exc.strerror, unreadable=True) from None
            except av.FFmpegError as exc:
                why = exc.strerror or str(exc)
            if time.monotonic() + RETRY_S >= deadline:
                break
            time.sleep(RETRY_S)
        raise _NotOpened(why)

    def _not_opened(self, exc: _NotOpened) -> str:
        """The line for a source that could not be opened within the connect timeout."""
        address, seconds = self.source.address, self.source.connect_timeout
        if exc.unreadable:
            return (
                f"{address}: data arrived but FFmpeg cannot read it as a stream ({exc.why}); check the "
                "address, and give --input-format for a stream without a header."
            )
        why = f" ({exc.why})" if exc.why else ""
        return (
            f"{address}: nothing arrived within --connect-timeout {seconds:g} s{why}; check the address and "
            "that the sender is running."
        )

    def _no_picture(self, cause: str) -> str:
        """The line for a source that opened but gave no picture: what did arrive, and what is missing."""
        address, seconds = self.source.address, self.source.connect_timeout
        if not self._seen["packets"]:
            return f"{address}: opened, but no packet came ({cause}); check that the sender sends a video."
        if self._seen["keyframe"]:
            return (
                f"{address}: packets arrive but none decodes to a picture ({self._decode_error or cause}); "
                "check that the sender sends a video FFmpeg can decode."
            )
        if cause == NO_KEYFRAME:
            return (
                f"{address}: packets arrive but no keyframe came within --connect-timeout {seconds:g} s of "
                "the first one; the sender's keyframes are further apart: raise --connect-timeout above its "
                "keyframe interval."
            )
        return (
            f"{address}: packets arrived but no keyframe before the stream ended ({cause}); a picture needs "
            "a keyframe: check that the sender sends one."
        )

    def _decode(self, container: av.container.InputContainer) -> str:
        """Demux and decode one connection until it ends; returns why it ended. Before the connection's
        first picture (a receiver that joined between two keyframes) packets that cannot be decoded are
        skipped."""
        if not container.streams.video:
            raise DecodeError(f"{self.source.address}: the stream holds no video.")
        stream = container.streams.video[0]
        stream.thread_count = 1  # FFmpeg's frame threads would hold frames back
        opened = time.perf_counter()
        keyframe = pictured = False
        self._seen = {"packets": 0, "keyframe": False}
        try:
            for packet in container.demux(stream):
                if self._closing:
                    return "closed"
                if packet.size:
                    self._arrived(time.perf_counter())
                keyframe = keyframe or bool(packet.is_keyframe)
                self._seen["keyframe"] = keyframe
                pictured = self._decode_packet(packet, stream, pictured) or pictured
                if self.recorder is not None:  # after decoding: muxing takes the packet over
                    self.recorder.write(packet, stream)
                if not pictured and time.perf_counter() - opened >= self.source.connect_timeout:
                    return (
                        NO_KEYFRAME
                        if not keyframe
                        else f"no picture within {self.source.connect_timeout:g} s"
                    )
        except av.FFmpegError as exc:
            # the read timeout interrupts FFmpeg, which says so (ExitError) or, mid-packet, that the data
            # is invalid: a silence as long as the timeout is the timeout
            last = self._last_packet if self._last_packet is not None else opened
            if isinstance(exc, av.ExitError) or time.perf_counter() - last >= 0.9 * self._wait:
                return silent_for(self._wait)
            return f"the stream failed ({exc.strerror or exc})"
        return END_OF_STREAM

    def _decode_packet(self, packet: av.Packet, stream: av.VideoStream, pictured: bool) -> bool:
        """Decode one packet, each frame handed to `_take`; whether a frame came. Before the connection's
        first picture a packet FFmpeg cannot decode is skipped (its message kept for `_no_picture`)."""
        try:
            frames = packet.decode()
        except av.FFmpegError as exc:
            if pictured:
                raise
            self._decode_error = exc.strerror or str(exc)
            return False
        for frame in frames:
            self._take(frame, stream)
        return bool(frames)

    def _arrived(self, now: float) -> None:
        """A packet came at `now`: a silence of the connect timeout or more before it, or a reconnection,
        is a gap (its real length: from the last packet before it). Not one the read timeout ended: FFmpeg's
        parser then hands over the frame it held (the last one before the silence)."""
        self._seen["packets"] += 1
        last, silence = self._last_packet, self.source.connect_timeout
        if self._reopened is None and last is not None and now - last >= self._wait:
            return  # the held frame, handed over when the read timed out
        if last is not None and self._last_time is not None and (self._reopened or now - last >= silence):
            cause = self._reopened or silent_for(silence)
            self.gaps.append(
                {"after_s": round(self._last_time, 6), "seconds": round(now - last, 3), "cause": cause}
            )
            self._resumed, self._reopened = True, None
        self._last_packet = now

    def _take(self, frame: av.VideoFrame, stream: av.VideoStream) -> None:
        """A decoded frame: timed, and when sampled put in the slot, replacing (dropping) a waiting one."""
        captured, captured_at = time.perf_counter(), time.time()
        time_s = self._time_of(frame, stream, captured_at)
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
        its start has a file's times), else by the wall clock (`now`).

        After a gap, or when the timestamps go back, the stream's clock is kept if it goes on (later than
        the last frame, by no more than the wall clock went on plus `CLOCK_SLACK_S`); else the times go on
        from the last one plus the wall-clock time since it."""
        if self.clock is None:
            has_pts = frame.pts is not None and stream.time_base is not None
            self.clock = STREAM_CLOCK if has_pts else WALL_CLOCK
        if self.clock == WALL_CLOCK or frame.pts is None or stream.time_base is None:
            if self._wall_origin is None:
                self._wall_origin = now
            return now - self._wall_origin
        stream_s = Fraction(frame.pts) * stream.time_base
        if self._origin is None:  # the first frame
            start = stream.start_time
            start = frame.pts if start is None or start > frame.pts else start
            self._origin, self._base = Fraction(start) * stream.time_base, 0.0
        time_s = self._base + float(stream_s - self._origin)
        last = self._last_time
        if last is not None and (self._resumed or time_s < last):
            since = max(time.perf_counter() - (self._last_capture or 0.0), 0.0)
            if not last < time_s <= last + since + CLOCK_SLACK_S:  # the stream's clock restarted or jumped
                self._origin, self._base = stream_s, last + since
                time_s = self._base
            self._resumed = False
        return time_s
