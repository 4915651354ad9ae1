"""`predict --online --record FILE`: the live stream written to FILE as it arrives, packet for packet
(remuxed, not re-encoded), so a case can be predicted again offline with the same frame times.

The recording starts at the first keyframe (a file must start with one to decode) and each packet is flushed
to the disk as it is written, so a killed process (kill -9) leaves a file readable up to its last packet;
MP4 is written fragmented for the same reason. FILE is written in place - not under a temporary name, which a
kill would leave behind - and refused before connecting when it exists, unless --overwrite. Only the first
connection is recorded: after a reconnection the stream may restart its clock or change its parameters, so
the recording ends there (its `ended` says so).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

import av

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import logger

# suffix -> (FFmpeg muxer, its options): each readable after a kill up to its last flushed packet
RECORD_FORMATS = {
    ".mkv": ("matroska", {"cluster_time_limit": "0", "cluster_size_limit": "1"}),
    ".ts": ("mpegts", {}),
    ".mp4": ("mp4", {"movflags": "frag_every_frame+empty_moov+default_base_moof"}),
}
RECONNECTED = "the stream reconnected; later connections are not recorded"


def check_record_path(path: str | os.PathLike, overwrite: bool) -> Path:
    """`--record FILE` checked before connecting: a known container, a folder that exists, no overwrite."""
    target = Path(path).expanduser()
    if target.suffix.lower() not in RECORD_FORMATS:
        known = ", ".join(RECORD_FORMATS)
        raise ConfigError(
            f"--record {path}: record to a {known} file (the container is named by its suffix)."
        )
    if not target.parent.is_dir():
        raise ConfigError(f"--record {path}: the folder {target.parent} does not exist; create it first.")
    if target.is_dir():
        raise ConfigError(f"--record {path}: is a folder; name a file.")
    if target.exists() and not overwrite:
        raise ConfigError(f"--record {path}: exists; name another file, or give --overwrite to replace it.")
    return target


class Recorder:
    """Remuxes one live connection's packets into `path`; `write` after each packet was decoded (muxing
    takes the packet over), `close` at the end writes the container's trailer."""

    def __init__(self, path: Path, overwrite: bool = False) -> None:
        self.path, self.overwrite = path, overwrite
        self.packets = self.skipped = 0
        self.ended: str | None = None
        self._handle: BinaryIO | None = None
        self._out: av.container.OutputContainer | None = None
        self._stream: Any = None
        self._source: av.VideoStream | None = None

    def write(self, packet: av.Packet, stream: av.VideoStream) -> None:
        """Write one packet of `stream` (skipped before the first keyframe; a new stream ends the file)."""
        if self.ended is not None or not packet.size:
            return
        if self._out is None:
            if not packet.is_keyframe:
                self.skipped += 1
                return
            self._open(stream)
        elif stream is not self._source:
            self.close(RECONNECTED)
            return
        packet.stream = self._stream
        try:
            self._out.mux(packet)
            self._handle.flush()  # type: ignore[union-attr]
        except (OSError, av.FFmpegError) as exc:  # a full disk ends the recording, not the prediction
            logger.warning("--record %s: writing failed (%s); the recording ends here", self.path, exc)
            self.close(f"writing failed: {exc}")
            return
        self.packets += 1

    def _open(self, stream: av.VideoStream) -> None:
        muxer, options = RECORD_FORMATS[self.path.suffix.lower()]
        # "xb": created here, so a file that appeared since the check is not overwritten either
        self._handle = open(self.path, "wb" if self.overwrite else "xb")  # noqa: SIM115 - closed in close()
        self._out = av.open(self._handle, "w", format=muxer, options={**options, "flush_packets": "1"})
        self._stream = self._out.add_stream_from_template(stream)
        self._source = stream

    def close(self, ended: str = "the stream ended") -> None:
        """Finish the file (its trailer); idempotent."""
        if self.ended is None:
            self.ended = ended
        out, handle, self._out, self._handle = self._out, self._handle, None, None
        try:
            if out is not None:
                out.close()
        except (OSError, av.FFmpegError) as exc:
            logger.warning("--record %s: finishing the file failed (%s)", self.path, exc)
        finally:
            if handle is not None:
                handle.close()

    def record(self) -> dict[str, Any]:
        """The results JSON's `live.recording`: where, how many packets, and how it ended."""
        return {
            "path": str(self.path),
            "format": RECORD_FORMATS[self.path.suffix.lower()][0],
            "packets": self.packets,
            "skipped_before_keyframe": self.skipped,
            "ended": self.ended,
        }
