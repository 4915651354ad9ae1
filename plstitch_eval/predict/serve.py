"""`predict --online --serve HOST:PORT`: the live procedure page, for the screen beside the monitor.

One page (`page/index.html`, shipped in the package: no CDN, no internet) shows the current phase, its
probabilities, remaining time and time to the next phase when such probes run, the case's phase ribbon so far,
the elapsed time and the link's state with latency p50/p99 and dropped frames. Each frame's prediction is
pushed to every viewer by Server-Sent Events as it is made. Starlette serves it under uvicorn, in a thread
beside the model (`plstitch[serve]`).

Nothing leaves the machine unless asked: the server binds to loopback by default; any other address needs a
token (`--serve-token`, or one generated and printed), without which the page and the events are refused.
No video frame is sent unless `--show-frames`: then the newest frame, downscaled to `FRAME_SIDE` and encoded
as JPEG on the server's side when a viewer asks (`/frame.jpg`, under the same token), never by the model. Each
viewer has a bounded queue; a viewer too slow to empty it, or gone, is
dropped, so viewers never slow the model.
"""

from __future__ import annotations

import asyncio
import bisect
import io
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import logger

LOOPBACK = ("127.0.0.1", "localhost", "::1")
QUEUE_EVENTS = 64  # a viewer this many events behind is dropped
LATENCY_WINDOW = 600  # latency p50/p99 over the last frames
KEEPALIVE_S = 10.0  # an SSE comment line this often keeps proxies from closing an idle stream
STARTUP_S = 10.0
FRAME_SIDE = 480  # --show-frames: the longer side of the JPEG the page gets (pixels)
NO_FRAMES = "404: no video frame is shown; start predict with --show-frames to show them\n"


@dataclass(frozen=True)
class ServeSettings:
    """Where the page is served and the token its requests must carry (None: none needed, loopback)."""

    host: str
    port: int
    token: str | None = None
    generated: bool = False  # the token was made here (printed once, with the page's address)
    show_frames: bool = False  # --show-frames: the newest video frame on the page (`/frame.jpg`)

    @property
    def url(self) -> str:
        """The page's address, with its token."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        query = f"/?token={self.token}" if self.token else "/"
        return f"http://{host}:{self.port}{query}"


def serve_settings(address: str, token: str | None = None, show_frames: bool = False) -> ServeSettings:
    """`--serve HOST:PORT` (or `PORT`: loopback) and `--serve-token`: a token is generated for an address
    other than loopback when none is given."""
    host, _, port_text = address.rpartition(":") if ":" in address else ("127.0.0.1", ":", address)
    host = host.strip("[]") or "127.0.0.1"
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"--serve {address}: give HOST:PORT (e.g. 127.0.0.1:8765) or a PORT.")
    if token is not None and len(token) < 16:
        raise ConfigError("--serve-token: use at least 16 characters (or leave it out: one is generated).")
    if token is None and host not in LOOPBACK:
        return ServeSettings(host, int(port_text), secrets.token_urlsafe(24), True, show_frames)
    return ServeSettings(host, int(port_text), token, show_frames=show_frames)


def jpeg_of(image: np.ndarray, side: int = FRAME_SIDE) -> bytes:
    """An RGB frame as a JPEG whose longer side is at most `side` (aspect kept)."""
    from PIL import Image

    picture = Image.fromarray(np.ascontiguousarray(image))
    picture.thumbnail((side, side))
    out = io.BytesIO()
    picture.save(out, format="JPEG", quality=80)
    return out.getvalue()


def check_serve_extra() -> None:
    """The `serve` extra's libraries, or one line naming it."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError(
            "--serve needs the serve extra: pip install 'plstitch[serve]' (Starlette and uvicorn)."
        ) from None


class LatencyWindow:
    """The last `size` latencies, kept sorted as they come (a binary-search insert and removal per frame), so
    that p50/p99 cost a lookup, not a sort of the window per frame; `np.quantile`'s linear interpolation."""

    def __init__(self, size: int = LATENCY_WINDOW) -> None:
        self.recent: deque[float] = deque(maxlen=size)
        self.ordered: list[float] = []

    def add(self, latency: float) -> None:
        if len(self.recent) == self.recent.maxlen:
            del self.ordered[bisect.bisect_left(self.ordered, self.recent[0])]
        self.recent.append(latency)
        bisect.insort(self.ordered, latency)

    def quantile(self, q: float) -> float:
        """The q-quantile (0..1), interpolated linearly between the two nearest ranks."""
        position = q * (len(self.ordered) - 1)
        low = int(position)
        high = min(low + 1, len(self.ordered) - 1)
        return self.ordered[low] + (self.ordered[high] - self.ordered[low]) * (position - low)


class CaseState:
    """What the page shows, kept between frames: the classes, the ribbon so far, the last frame, latency.

    With several probes (`phase_probe`: the prefix of the one whose classes the page shows) the row's fields
    are `<prefix>.<column>`; `values` name the regression probes' columns as the row does."""

    def __init__(
        self, classes: Sequence[str], values: Sequence[str], source: str, phase_probe: str | None = None
    ) -> None:
        self.classes, self.values, self.source = list(classes), list(values), source
        self.phase_probe = phase_probe
        self.show_frames = False
        self.segments: list[list[Any]] = []  # [start_s, end_s, class index]
        self.last: dict[str, Any] | None = None
        self.latencies = LatencyWindow()
        self.frames = 0
        self.ended: str | None = None

    def add(self, row: dict[str, Any]) -> dict[str, Any]:
        """One frame's row (as `--jsonl` writes it): the event the viewers get."""
        self.frames += 1
        latency = row.get("latency_s")
        if latency is not None:
            self.latencies.add(float(latency))
        time_s = float(row["time_s"])
        prefix = "" if self.phase_probe is None else f"{self.phase_probe}."
        predicted = row.get(f"{prefix}predicted")
        if predicted in self.classes:
            index = self.classes.index(predicted)
            if self.segments:  # the run so far ends here, whether this frame goes on with it or not
                self.segments[-1][1] = time_s
            if not self.segments or self.segments[-1][2] != index:
                self.segments.append([time_s, time_s, index])
        self.last = {
            "video": row.get("video"),
            "time_s": time_s,
            "predicted": predicted,
            "probabilities": {c: row[prefix + c] for c in self.classes if prefix + c in row},
            "values": {v: row[v] for v in self.values if v in row},
            "dropped": row.get("dropped", 0),
            "latency_s": latency,
            **self.latency_quantiles(),
            "frames": self.frames,
            **({} if self.phase_probe is None else {"phase_probe": self.phase_probe}),
        }
        return {"type": "frame", **self.last}

    def latency_quantiles(self) -> dict[str, float | None]:
        if not self.latencies.ordered:
            return {"latency_p50_s": None, "latency_p99_s": None}
        p50, p99 = self.latencies.quantile(0.5), self.latencies.quantile(0.99)
        return {"latency_p50_s": round(p50, 4), "latency_p99_s": round(p99, 4)}

    def snapshot(self) -> dict[str, Any]:
        """The whole state, sent to a viewer when it connects (so a late viewer sees the ribbon so far)."""
        return {
            "type": "state",
            "source": self.source,
            "classes": self.classes,
            "values": self.values,
            "segments": self.segments,
            "last": self.last,
            "ended": self.ended,
            "show_frames": self.show_frames,
        }


class _Viewer:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=QUEUE_EVENTS)
        self.dropped = False


class LivePage:
    """The page's server, in a thread: `start()`, then `publish(row)` per frame from the model's thread
    (never blocks), `finish(ended)` when the case ends, `close()` to stop serving."""

    def __init__(self, settings: ServeSettings, state: CaseState) -> None:
        check_serve_extra()
        self.settings, self.state = settings, state
        state.show_frames = settings.show_frames
        self.picture: np.ndarray | None = None  # --show-frames: the newest frame (encoded when asked)
        self.viewers: list[_Viewer] = []
        self.dropped_viewers = 0
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = settings.port

    # ------------------------------------------------------------------------------ model side
    def start(self) -> None:
        """Serve in a thread; returns once the port listens (a taken port is one line)."""
        import uvicorn

        config = uvicorn.Config(
            self._app(), host=self.settings.host, port=self.settings.port, log_level="warning",
            lifespan="off", access_log=False,
        )  # fmt: skip
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="plstitch page", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + STARTUP_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(
                    f"--serve {self.settings.host}:{self.settings.port}: could not listen there (in use, or "
                    "not this machine's address); choose another HOST:PORT."
                )
            time.sleep(0.02)
        sockets = [s for server in self._server.servers for s in server.sockets]
        if sockets:
            self.port = sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return ServeSettings(self.settings.host, self.port, self.settings.token).url

    def publish(self, row: dict[str, Any]) -> None:
        """One frame's row to every viewer; a viewer whose queue is full is dropped (never waited for)."""
        with self._lock:
            event = self.state.add(row)
        self._send(json.dumps(event))

    def show(self, image: np.ndarray) -> None:
        """The newest video frame (uint8 RGB), kept by reference for `/frame.jpg` (no copy, no encoding here:
        the model never waits for it); ignored without --show-frames."""
        if self.settings.show_frames:
            self.picture = image

    def finish(self, ended: str) -> None:
        """The case ended: every viewer is told how, and its stream closed."""
        with self._lock:
            self.state.ended = ended
        self._send(json.dumps({"type": "ended", "ended": ended, "frames": self.state.frames}))
        self._send(None)

    def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _send(self, text: str | None) -> None:
        for viewer in list(self.viewers):
            viewer.loop.call_soon_threadsafe(self._offer, viewer, text)

    def _offer(self, viewer: _Viewer, text: str | None) -> None:  # on the server's loop
        if viewer.dropped:
            return
        try:
            viewer.queue.put_nowait(text)
        except asyncio.QueueFull:  # too slow: dropped, its stream ended (the model never waits for it)
            viewer.dropped = True
            self.dropped_viewers += 1
            self._remove(viewer)
            while not viewer.queue.empty():
                viewer.queue.get_nowait()
            viewer.queue.put_nowait(None)

    def _remove(self, viewer: _Viewer) -> None:
        with self._lock:
            if viewer in self.viewers:
                self.viewers.remove(viewer)

    # ----------------------------------------------------------------------------- server side
    def _app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import (
            HTMLResponse,
            JSONResponse,
            PlainTextResponse,
            Response,
            StreamingResponse,
        )
        from starlette.routing import Route

        page = resources.files("plstitch_eval.predict").joinpath("page/index.html").read_text("utf-8")

        def allowed(request: Any) -> bool:
            token = self.settings.token
            if token is None:
                return True
            given = request.query_params.get("token") or request.headers.get("authorization", "")
            given = given.removeprefix("Bearer ").strip()
            return secrets.compare_digest(given.encode(), token.encode())

        def refused() -> PlainTextResponse:
            return PlainTextResponse("403: this page needs its token (?token=...)\n", status_code=403)

        async def index(request: Any) -> Any:
            if not allowed(request):
                return refused()
            return HTMLResponse(page, headers={"Cache-Control": "no-store"})

        async def state(request: Any) -> Any:
            if not allowed(request):
                return refused()
            with self._lock:
                snapshot = self.state.snapshot()
            return JSONResponse({**snapshot, "viewers": len(self.viewers), "dropped": self.dropped_viewers})

        async def events(request: Any) -> Any:
            if not allowed(request):
                return refused()
            viewer = _Viewer(asyncio.get_running_loop())
            with self._lock:
                first = json.dumps(self.state.snapshot())
                ended = self.state.ended is not None
                if not ended:
                    self.viewers.append(viewer)
            stream = self._stream(viewer, first, ended)
            headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
            return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

        async def frame(request: Any) -> Any:
            if not allowed(request):
                return refused()
            picture = self.picture
            if not self.settings.show_frames or picture is None:
                text = NO_FRAMES if not self.settings.show_frames else "404: no frame yet\n"
                return PlainTextResponse(text, status_code=404)
            body = await run_in_threadpool(jpeg_of, picture)
            return Response(body, media_type="image/jpeg", headers={"Cache-Control": "no-store"})

        routes = [Route("/", index), Route("/state", state), Route("/events", events)]
        routes.append(Route("/frame.jpg", frame))
        return Starlette(routes=routes)

    async def _stream(self, viewer: _Viewer, first: str, ended: bool) -> AsyncIterator[str]:
        try:
            yield f"data: {first}\n\n"
            while not ended:
                try:
                    text = await asyncio.wait_for(viewer.queue.get(), KEEPALIVE_S)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if text is None:
                    break
                yield f"data: {text}\n\n"
        finally:
            self._remove(viewer)


def open_page(settings: ServeSettings, probes: Any, sources: Sequence[str]) -> LivePage:
    """The page for the predictions of `sources` by a `ProbeSet` (its first phase probe's classes, every
    regression probe's minutes), serving (its address printed on stderr)."""
    phase = probes.phase_probe
    classes = list(phase[1].class_names) if phase is not None else []
    values = [
        probes.column(prefix, column)
        for prefix, probe in probes.named()
        for column in probe.live_columns  # a regression probe's minutes, a multi-label probe's labels
    ]
    shown_probe = None if probes.single or phase is None else phase[0]
    page = LivePage(settings, CaseState(classes, values, ", ".join(sources), shown_probe))
    page.start()
    token_note = " (a token was generated: the page and its events refuse requests without it)"
    logger.warning("live page: %s%s", page.url, token_note if settings.generated else "")
    return page
