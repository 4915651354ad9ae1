"""Output: each video's files under `--out` as soon as it ends: `<video>.csv` and its timeline figure
(`outputs.write_prediction`), or with several probes one CSV of prefixed columns and a figure per probe
(`case.write_case`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plstitch_eval.predict.case import CasePrediction, write_case
from plstitch_eval.predict.outputs import VideoPrediction, write_prediction
from plstitch_eval.predict.pipeline import Sink
from plstitch_eval.predict.probeset import ProbeSet


def write_result(
    result: VideoPrediction | CasePrediction, probes: ProbeSet, out: str | Path, title: str
) -> dict[str, str]:
    """A video's files: `write_prediction` (one probe), or `write_case` (several)."""
    if isinstance(result, CasePrediction):
        return write_case(result, out, title)
    return write_prediction(result, probes.first, out, title)


class CsvOut(Sink):
    """The `--out` folder's per-video files, written when a video with frames ends; each figure titled
    `<video>: <title>`."""

    def __init__(self, out: str | Path, probes: ProbeSet, title: str) -> None:
        self.out, self.probes, self.title = out, probes, title

    def video(self, result: Any) -> None:
        if result.frames:
            write_result(result, self.probes, self.out, f"{result.video}: {self.title}")
