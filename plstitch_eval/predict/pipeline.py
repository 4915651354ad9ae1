"""The line of a predict run: source -> reader -> encoder -> heads -> outputs.

A source (`sources.VideoSource`) is read frame by frame (`online`: a file, a pipe, a live reader), each
frame encoded once per backbone (`encoder`, `backbones`) and read by every probe's head (`heads`, `case`);
what that frame predicts (`PredictedFrame`) goes to every output, and each output is one module with one
job: the per-second line (`out_console`), the JSON lines (`out_jsonl`), the live page (`out_page`), each
video's CSV and figures (`out_csv`). Adding an output is adding one `FrameSink`. (The recording, `record`,
is made by the live reader from the stream's packets, before decoding: it needs no prediction.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np


@dataclass
class PredictedFrame:
    """One frame's predictions as the outputs get them: its `--jsonl` row (`row`: time, frame, every probe's
    fields, capture time, latency, drops; made on first use), the decoded RGB image, and `text()`: the
    newest output in words with its probability (None: a regression probe's, or several probes'). Valid
    while the outputs are called (the heads move on with the next frame)."""

    video: str
    time_s: float
    index: int
    image: np.ndarray
    latency_s: float
    fields: Callable[[], dict[str, Any]]
    text: Callable[[], tuple[str, float | None]]

    @cached_property
    def row(self) -> dict[str, Any]:
        return self.fields()


class FrameSink(Protocol):
    """An output of a predict run: opened before the first frame, handed every frame's predictions and every
    finished video, closed with the run's summary (None when the run failed)."""

    def open(self) -> None: ...

    def frame(self, frame: PredictedFrame) -> None: ...

    def video(self, result: Any) -> None: ...

    def close(self, summary: Any) -> None: ...


class Sink:
    """A `FrameSink` that does nothing: an output overrides what it needs."""

    def open(self) -> None:
        return None

    def frame(self, frame: PredictedFrame) -> None:
        return None

    def video(self, result: Any) -> None:
        return None

    def close(self, summary: Any) -> None:
        return None


class Outputs(Sink):
    """Several outputs as one: each call handed to every output in turn; a context manager that opens them
    all and, when the run fails, closes them (a finished run closes them with its summary, `close`)."""

    def __init__(self, sinks: Sequence[FrameSink | None] = ()) -> None:
        self.sinks = [s for s in sinks if s is not None]
        self._closed = False

    def __enter__(self) -> Outputs:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self.close(None)

    def open(self) -> None:
        for sink in self.sinks:
            sink.open()

    def frame(self, frame: PredictedFrame) -> None:
        for sink in self.sinks:
            sink.frame(frame)

    def video(self, result: Any) -> None:
        for sink in self.sinks:
            sink.video(result)

    def close(self, summary: Any) -> None:
        self._closed = True
        for sink in self.sinks:
            sink.close(summary)


class Callbacks(Sink):
    """The per-frame callbacks of the Python API (`on_frame`: each frame's row, `on_image`: its image) as
    an output."""

    def __init__(
        self,
        on_frame: Callable[[dict[str, Any]], None] | None = None,
        on_image: Callable[[np.ndarray], None] | None = None,
    ) -> None:
        self.on_frame, self.on_image = on_frame, on_image

    def frame(self, frame: PredictedFrame) -> None:
        if self.on_image is not None:
            self.on_image(frame.image)
        if self.on_frame is not None:
            self.on_frame(frame.row)
