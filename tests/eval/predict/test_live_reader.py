"""The live reader itself (`predict.live.LiveReader`), without a network: the one-frame slot keeps the newest
frame and counts the one it replaces; after a gap the times follow the stream's own clock when it goes on and
the wall clock when it restarted."""

from __future__ import annotations

import time
from fractions import Fraction

import av
import numpy as np
import pytest

from plstitch_eval.predict import LiveReader, LiveSource, StopRequest

TIME_BASE = Fraction(1, 90000)  # MPEG-TS


class Stream:
    """What the reader reads of a PyAV video stream."""

    time_base = TIME_BASE
    start_time = 0


def frame_at(seconds: float, value: int = 0) -> av.VideoFrame:
    frame = av.VideoFrame.from_ndarray(np.full((16, 16, 3), value, np.uint8), format="rgb24")
    frame.pts = round(seconds * 90000)
    return frame


def test_two_frames_before_one_is_taken_keep_the_newer_and_count_one_drop():
    reader = LiveReader(LiveSource("udp://127.0.0.1:9"), fps=None)
    reader._take(frame_at(0.00, value=10), Stream())
    reader._take(frame_at(0.04, value=200), Stream())  # arrives before the consumer took the first
    reader._finished = True  # the stream ended: what is in the slot is handed over, then the samples end
    taken = list(reader.samples(StopRequest()))
    assert len(taken) == 1
    assert taken[0].frame.index == 1 and taken[0].frame.time == pytest.approx(0.04)
    assert int(taken[0].frame.image.mean()) == 200  # the newer picture, not only its number
    assert taken[0].dropped == 1 and reader.dropped == 1 and reader.due == 2


def test_after_a_gap_the_stream_clock_is_kept_when_it_goes_on():
    """A sender that paused and went on where it was: its timestamps go on, so the times do (not shifted by
    the silence)."""
    reader = LiveReader(LiveSource("udp://127.0.0.1:9"), fps=None)
    for i in range(5):
        reader._take(frame_at(i * 0.04), Stream())
    reader._last_capture = time.perf_counter() - 5.0  # 5 s of silence
    reader._resumed = True  # a gap was recorded
    assert reader._time_of(frame_at(0.20), Stream(), now=0.0) == pytest.approx(0.20)
    # a live camera's clock that went on with the wall clock is kept too
    reader._last_time, reader._last_capture = 0.20, time.perf_counter() - 5.0
    reader._resumed = True
    assert reader._time_of(frame_at(5.20), Stream(), now=0.0) == pytest.approx(5.20)


@pytest.mark.parametrize("restart_at", [0.0, 3600.0])  # a sender restarted from its start; a clock jump
def test_after_a_gap_a_restarted_stream_clock_goes_on_from_the_wall_clock(restart_at):
    reader = LiveReader(LiveSource("udp://127.0.0.1:9"), fps=None)
    for i in range(51):
        reader._take(frame_at(i * 0.04), Stream())  # 0 .. 2.0 s
    reader._last_capture = time.perf_counter() - 4.0  # 4 s of silence
    reader._resumed = True
    resumed = reader._time_of(frame_at(restart_at), Stream(), now=0.0)
    assert 2.0 + 4.0 <= resumed < 2.0 + 4.0 + 1.0  # the last time plus the silence
    reader._last_time = resumed
    assert reader._time_of(frame_at(restart_at + 0.5), Stream(), now=0.0) == pytest.approx(resumed + 0.5)


def test_timestamps_that_go_back_without_a_gap_do_not_take_the_times_back():
    reader = LiveReader(LiveSource("udp://127.0.0.1:9"), fps=None)
    for i in range(26):
        reader._take(frame_at(10.0 + i * 0.04), Stream())  # 10 .. 11 s of the stream's clock
    back = reader._time_of(frame_at(0.0), Stream(), now=0.0)
    assert back >= reader._last_time
