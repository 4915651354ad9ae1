"""Output: the live page (`--serve HOST:PORT`, `serve.LivePage`): serving from the run's start, each frame's
row pushed to its viewers (its image too with `--show-frames`), told how the case ended when the run ends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plstitch_eval.predict.pipeline import PredictedFrame, Sink
from plstitch_eval.predict.request import stopped_verb
from plstitch_eval.predict.serve import LivePage, ServeSettings, open_page


class PageOut(Sink):
    """The page of a run's predictions by `probes` (a `ProbeSet`) of the sources named `names`."""

    def __init__(self, settings: ServeSettings, probes: Any, names: Sequence[str]) -> None:
        self.settings, self.probes, self.names = settings, probes, list(names)
        self.page: LivePage | None = None

    def open(self) -> None:
        self.page = open_page(self.settings, self.probes, self.names)

    def frame(self, frame: PredictedFrame) -> None:
        assert self.page is not None, "PageOut is opened before the first frame"
        if self.settings.show_frames:
            self.page.show(frame.image)  # before the row: a viewer told of a frame can fetch its picture
        self.page.publish(frame.row)

    def close(self, summary: Any) -> None:
        """Tell the viewers how the case ended (a finished run's `summary`; None: the run failed, nothing to
        say) and stop serving."""
        if self.page is None:
            return
        if summary is not None:
            self.page.finish(case_ended(summary))
        self.page.close()
        self.page = None


def case_ended(summary: Any) -> str:
    """How the case ended, as the page says it: the last video's end, or the stop."""
    if summary.interrupted:
        return stopped_verb(summary.stop_signal)
    last = summary.predictions[-1] if summary.predictions else None
    return (last.ended if last is not None else None) or "the run ended"
