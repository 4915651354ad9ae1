"""Output: the per-second line of an online run (`OnlineUpdate`), on stdout, or on stderr when stdout carries
`--jsonl -`: the first frame of every video second (every frame when they are further apart)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import typer

from plstitch_eval.predict.pipeline import PredictedFrame, Sink


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
    phase: str  # a regression probe's minutes in words (`heads.headline`)
    probability: float | None  # None: a regression probe
    latency_s: float

    def line(self, with_video: bool = False) -> str:
        """`   12.0 s  Phase  p=0.83  latency=3.2 ms` (the video's name first when asked)."""
        video = f"{self.video}  " if with_video else ""
        p = "" if self.probability is None else f"  p={self.probability:.2f}"
        return f"{video}{self.time_s:7.1f} s  {self.phase}{p}  latency={self.latency_s * 1000:.1f} ms"


class SecondLines(Sink):
    """Hands `emit` an `OnlineUpdate` at the first frame of every video second of each video."""

    def __init__(self, emit: Callable[[OnlineUpdate], None]) -> None:
        self.emit = emit
        self.last: tuple[str, int] | None = None  # (video, second) of the last update

    def frame(self, frame: PredictedFrame) -> None:
        second = int(np.floor(frame.time_s + 1e-6))
        if self.last is not None and self.last[0] == frame.video and second <= self.last[1]:
            return
        self.last = (frame.video, second)
        phase, probability = frame.text()
        self.emit(OnlineUpdate(frame.video, frame.time_s, frame.index, phase, probability, frame.latency_s))

    def video(self, result: object) -> None:
        self.last = None  # the next video starts its seconds again (even under the same name)


def second_printer(with_video: bool, to_stderr: bool) -> Callable[[OnlineUpdate], None]:
    """The per-second line printer of an online run: stdout, or stderr when stdout carries `--jsonl -`."""

    def emit(update: OnlineUpdate) -> None:
        typer.echo(update.line(with_video=with_video), err=to_stderr)

    return emit
