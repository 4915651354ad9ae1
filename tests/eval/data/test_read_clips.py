"""`read_clips`: the window of every sampled frame, from one decoding pass, against a brute-force reference.

The media encode each frame's index in its pixels (`media.index_image`): windows are checked frame by frame.
Reference (the documented rule, on every decoded frame): the sampled frame covers targets m / fps starting at
the first target after the previous frame; window frame k is the first frame at or after
m / fps + (k - anchor) * step, the last frame when there is none.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from plstitch_eval.data.video import ClipSampling, probe, read_clips, read_frames
from plstitch_eval.errors import ConfigError, DecodeError
from tests.eval.data.media import decode_index, write_index_frames, write_index_video

TOLERANCE = 1e-6


def reference_windows(times: list[float], fps: float, clip: ClipSampling, step: float) -> list[list[int]]:
    """Frame indices of each window, from the list of every decoded frame's time."""
    windows = []
    for sampled in _sampled(times, fps):
        first_target = 0 if sampled == 0 else math.floor((times[sampled - 1] + TOLERANCE) * fps) + 1
        window = []
        for k in range(clip.num_frames):
            wanted = first_target / fps + (k - clip.anchor) * step
            at_or_after = [i for i, t in enumerate(times) if t + TOLERANCE >= wanted]
            window.append(at_or_after[0] if at_or_after else len(times) - 1)
        windows.append(window)
    return windows


def _sampled(times: list[float], fps: float) -> list[int]:
    """Frames `read_frames` samples: first frame at or after each m / fps, each once."""
    chosen, m = [], 0
    for i, t in enumerate(times):
        if t + TOLERANCE >= m / fps:
            chosen.append(i)
            m = math.floor((t + TOLERANCE) * fps) + 1
    return chosen


class CountingPrepare:
    """A `prepare` that records which frames it was asked to prepare."""

    def __init__(self) -> None:
        self.indices: list[int] = []

    def __call__(self, image: np.ndarray) -> np.ndarray:
        self.indices.append(decode_index(image))
        return image


def test_video_windows_are_every_third_frame_around_the_sample(tmp_path):
    path = write_index_video(tmp_path / "v.mp4", n_frames=60, fps=25)
    clip = ClipSampling(num_frames=5, frame_stride=3)  # anchor 2: offsets -6, -3, 0, +3, +6 frames
    prepare = CountingPrepare()
    windows = list(read_clips(path, fps=5, clip=clip, prepare=prepare))
    expected = [[min(max(5 * m + 3 * (k - 2), 0), 59) for k in range(5)] for m in range(12)]
    assert [[decode_index(f) for f in w.frames] for w in windows] == expected
    sampled = list(read_frames(path, fps=5))  # the same sampled frames, indices and times as for images
    assert [(w.index, w.time) for w in windows] == [(f.index, f.time) for f in sampled]
    np.testing.assert_allclose(windows[3].frame_times, (np.array(expected[3]) / 25), atol=1e-6)
    used = {i for window in expected for i in window}
    assert len(prepare.indices) == len(set(prepare.indices))  # no frame prepared twice
    # every frame a window uses, and no other but the last few a window of a target past the end would use
    assert used <= set(prepare.indices) and min(set(prepare.indices) - used) >= 60 - 2 * 3
    assert windows[0].frames[0] is windows[0].frames[1]  # the repeated first frame is one shared object


def test_frame_folder_with_a_fixed_time_step(tmp_path):
    folder = write_index_frames(tmp_path / "frames", n_frames=30, pattern="{:04d}.png")  # 10 fps below
    clip = ClipSampling(num_frames=4, stride_seconds=0.25)
    windows = list(read_clips(folder, fps=2, clip=clip, folder_fps=10))
    assert [[decode_index(f) for f in w.frames] for w in windows] == reference_windows(
        [i / 10 for i in range(30)], 2, clip, 0.25
    )
    assert [decode_index(f) for f in windows[0].frames] == [0, 0, 0, 3]  # before the start: the first frame
    assert [decode_index(f) for f in windows[-1].frames] == [20, 23, 25, 28]


@pytest.mark.parametrize("fps", [1.0, 2.5, 7.0])
def test_variable_frame_rate_matches_the_brute_force_rule(tmp_path, fps):
    pts_ms = [0, 40, 80, 500, 1000, 1040, 1200, 1240, 2600, 3000, 3100, 3140, 3180, 4900]
    path = write_index_video(tmp_path / "vfr.mp4", n_frames=len(pts_ms), pts_ms=pts_ms)
    clip = ClipSampling(num_frames=6, frame_stride=2, anchor=4)  # 2 frames at the container's average rate
    windows = list(read_clips(path, fps=fps, clip=clip))
    times = [t / 1000 for t in pts_ms]
    step = 2 / probe(path).fps
    assert [[decode_index(f) for f in w.frames] for w in windows] == reference_windows(times, fps, clip, step)
    assert [decode_index(w.frames[-1]) for w in windows][-1] == len(
        pts_ms
    ) - 1  # past the end: the last frame


def test_resize_on_decode_and_bad_arguments(tmp_path):
    path = write_index_video(tmp_path / "v.mp4", n_frames=10, fps=25, size=(48, 32))
    window = next(read_clips(path, fps=5, clip=ClipSampling(2), size=16))
    assert window.frames[0].shape == (16, 24, 3)
    with pytest.raises(ConfigError, match="fps > 0"):
        next(read_clips(path, fps=0, clip=ClipSampling(2)))
    with pytest.raises(DecodeError, match="no such video"):
        next(read_clips(tmp_path / "missing.mp4", fps=1, clip=ClipSampling(2)))
    with pytest.raises(ConfigError, match="anchor must be in"):
        ClipSampling(4, anchor=4)
    with pytest.raises(ConfigError, match="stride_seconds must be > 0"):
        ClipSampling(4, stride_seconds=0)
