"""`plstitch_eval.data.sampling` without any decoder: the sampling rule over bare presentation times, and clip
windows assembled from frames that are loaded only when some window uses them."""

from __future__ import annotations

import numpy as np
import pytest

from plstitch_eval.data import video
from plstitch_eval.data.sampling import ClipSampling, TargetClock, assemble_clips
from plstitch_eval.errors import ConfigError


def _taken(times: list[float], fps: float | None) -> list[float]:
    clock = TargetClock(fps)
    return [t for t in times if clock.take(t)]


def test_the_first_frame_at_or_after_each_target_is_taken_once():
    assert _taken([i / 25 for i in range(60)], 1.0) == [0.0, 1.0, 2.0]
    assert _taken([0.0, 0.4, 2.5, 2.6, 3.0], 1.0) == [0.0, 2.5, 3.0]  # 2.5 covers targets 1 and 2: once
    assert _taken([i / 3 for i in range(4)], 3.0) == [0.0, 1 / 3, 2 / 3, 1.0]  # float rounding tolerated
    assert _taken([0.0, 0.1, 0.2], None) == [0.0, 0.1, 0.2]


def test_the_old_names_stay_importable_from_video():
    assert video.ClipSampling is ClipSampling
    assert video.assemble_clips is assemble_clips and video.TIME_TOLERANCE == 1e-6


def test_windows_clamp_at_both_ends_and_load_only_the_frames_they_use():
    loaded: list[int] = []

    def frames(n: int):
        for i in range(n):
            yield i / 10, (lambda i=i: loaded.append(i) or np.full((2, 2, 3), i, np.uint8))

    clip = ClipSampling(3, frame_stride=2)  # frames 2 apart at 10 fps, centred on the sampled one
    windows = list(assemble_clips(frames(25), 2.0, clip, 10.0, prepare=lambda image: int(image[0, 0, 0])))
    assert [w.time for w in windows] == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0])
    assert [w.frames for w in windows] == [(0, 0, 2), (3, 5, 7), (8, 10, 12), (13, 15, 17), (18, 20, 22)]
    # each once, and only those at window times (23: 2.5 - 0.2, for a window the video ends before)
    assert sorted(loaded) == sorted(set(loaded)) == [0, 2, 3, 5, 7, 8, 10, 12, 13, 15, 17, 18, 20, 22, 23]
    (last,) = list(assemble_clips(frames(3), 1.0, ClipSampling(3, stride_seconds=0.5), 10.0))
    assert last.frame_times == pytest.approx((0.0, 0.0, 0.2))  # past the end: the last frame


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [({"num_frames": 0}, "at least one frame"), ({"num_frames": 2, "frame_stride": 0}, "frame_stride"),
     ({"num_frames": 2, "stride_seconds": 0.0}, "stride_seconds"), ({"num_frames": 2, "anchor": 2}, "anchor"),
    ],
)  # fmt: skip
def test_a_window_no_video_can_fill_is_refused(kwargs, words):
    with pytest.raises(ConfigError, match=words):
        ClipSampling(**kwargs)


def test_the_step_is_frames_at_the_videos_rate_or_fixed_seconds():
    assert ClipSampling(4).anchor == 2 and ClipSampling(4, frame_stride=3).step(30.0) == pytest.approx(0.1)
    assert ClipSampling(4, stride_seconds=0.25).step(30.0) == 0.25
