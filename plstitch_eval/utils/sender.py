"""Stream a video file to a URL at real-time pace, as an endoscopy tower or a recorder sends its feed: the
file's packets (no re-encoding) muxed as MPEG-TS to `udp://HOST:PORT` or `tcp://HOST:PORT?listen=1`.

For trying `plstitch predict --online` without a camera, and for the tests and `benchmarks/online.py`:
`python -m plstitch_eval.utils.sender VIDEO URL [--pause-at S --pause-for S] [--stop-at S] [--loops N]`.
Prints `sending` once the output is open, then `sent N packets` on stdout.
"""

from __future__ import annotations

import argparse
import socket
import time
from dataclasses import dataclass
from pathlib import Path

import av

UDP_PACKET = 1316  # 7 MPEG-TS packets: one datagram below a 1500-byte MTU


@dataclass(frozen=True)
class Pacing:
    """How a stream is sent: `pace` x real time; a pause of `pause_for` seconds when the video reaches
    `pause_at` (the sender then goes on where it was, late); stop for good at `stop_at`; `loops` times."""

    pace: float = 1.0
    pause_at: float | None = None
    pause_for: float = 0.0
    stop_at: float | None = None
    loops: int = 1


def send_video(video: str | Path, url: str, pacing: Pacing = Pacing(), fmt: str = "mpegts") -> int:
    """Send `video`'s video packets to `url` in real time; returns the number of packets sent."""
    sent = 0
    with av.open(str(url), "w", format=fmt, options={"flush_packets": "1"}) as out:
        print("sending", flush=True)
        stream_out = None
        started = time.monotonic()
        offset = 0.0  # seconds of stream already sent in earlier loops
        paused = False
        for _ in range(pacing.loops):
            with av.open(str(video)) as src:
                stream = src.streams.video[0]
                if stream_out is None:
                    stream_out = out.add_stream_from_template(stream)
                origin = stream.start_time or 0
                last = 0.0
                for packet in src.demux(stream):
                    if packet.dts is None or packet.pts is None:
                        continue
                    at = float((packet.pts - origin) * stream.time_base)
                    last = max(last, at)
                    if pacing.stop_at is not None and offset + at >= pacing.stop_at:
                        return sent
                    if pacing.pause_at is not None and not paused and offset + at >= pacing.pause_at:
                        time.sleep(pacing.pause_for)
                        started += pacing.pause_for
                        paused = True
                    time.sleep(max(0.0, started + (offset + at) / pacing.pace - time.monotonic()))
                    shift = round(offset / float(stream.time_base))
                    packet.pts += shift
                    packet.dts += shift
                    packet.stream = stream_out
                    out.mux(packet)
                    sent += 1
                offset += last + 1.0 / float(stream.average_rate or 25)
    return sent


def free_port(kind: int = socket.SOCK_DGRAM, host: str = "127.0.0.1") -> int:
    """A port nobody uses now on `host` (UDP by default; `socket.SOCK_STREAM` for TCP)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def wait_udp_listener(port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
    """Wait until a receiver has bound UDP `port` (binding it ourselves then fails), so that the stream's
    first datagrams (its header and first keyframe) are not sent to nobody."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing bound UDP port {port} within {timeout:g} s")


def main(argv: list[str] | None = None) -> None:
    """`python -m plstitch_eval.utils.sender VIDEO URL ...`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("video")
    parser.add_argument("url", help="udp://127.0.0.1:5000 or tcp://127.0.0.1:5000?listen=1")
    parser.add_argument("--pace", type=float, default=1.0)
    parser.add_argument("--pause-at", type=float)
    parser.add_argument("--pause-for", type=float, default=0.0)
    parser.add_argument("--stop-at", type=float)
    parser.add_argument("--loops", type=int, default=1)
    args = parser.parse_args(argv)
    url = args.url
    if url.startswith("udp://") and "pkt_size" not in url:
        url += ("&" if "?" in url else "?") + f"pkt_size={UDP_PACKET}"
    pacing = Pacing(args.pace, args.pause_at, args.pause_for, args.stop_at, args.loops)
    print(f"sent {send_video(args.video, url, pacing)} packets", flush=True)


if __name__ == "__main__":
    main()
