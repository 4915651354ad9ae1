"""Black-margin detection on frames with known borders: pillars, letterbox bars, a circular scope field,
all-dark videos, dim picture regions; against a per-row/column loop written here; the box in the plan."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from plstitch_eval.data.margin import (
    LATE_WINDOWS,
    MARGIN_FRAMES,
    MarginBox,
    crop_margin,
    detect_black_margin,
    detect_video_margin,
    late_margin_samples,
    lit_frames,
    margin_moved,
    margin_sample,
    warn_if_margin_changes,
)
from plstitch_eval.errors import DataError
from plstitch_eval.preprocess import DataConfig, frame_plan, resize_and_crop
from plstitch_eval.utils.console import logger
from tests.media import write_video

N_FRAMES = 4


def _frames(picture: np.ndarray, seed: int = 0, border_noise: int = 8) -> torch.Tensor:
    """uint8 [N, 3, H, W]: `picture` (bool [H, W], True = picture) filled with random levels 40-255 that
    change per frame, the rest black with noise of up to `border_noise` grey levels."""
    rng = np.random.default_rng(seed)
    height, width = picture.shape
    bright = rng.integers(40, 256, size=(N_FRAMES, 3, height, width))
    noise = rng.integers(0, border_noise + 1, size=(N_FRAMES, 3, height, width))
    return torch.from_numpy(np.where(picture, bright, noise).astype(np.uint8))


def _box_mask(height: int, width: int, y0: int, y1: int, x0: int, x1: int) -> np.ndarray:
    mask = np.zeros((height, width), dtype=bool)
    mask[y0:y1, x0:x1] = True
    return mask


def reference_box(frames: torch.Tensor, threshold: float = 15, min_fraction: float = 0.02) -> MarginBox:
    """The same rule, written independently: per-frame grey, its mean, then a loop over rows and columns."""
    f = frames.numpy().astype(np.float64)
    grey = np.mean([0.299 * fr[0] + 0.587 * fr[1] + 0.114 * fr[2] for fr in f], axis=0)
    height, width = grey.shape
    rows = [y for y in range(height) if np.count_nonzero(grey[y, :] > threshold) > min_fraction * width]
    cols = [x for x in range(width) if np.count_nonzero(grey[:, x] > threshold) > min_fraction * height]
    if not rows or not cols:
        return MarginBox()
    top, bottom, left, right = (
        rows[0] / height,
        (rows[-1] + 1) / height,
        cols[0] / width,
        (cols[-1] + 1) / width,
    )
    top, left = (0.0 if top < 0.01 else top), (0.0 if left < 0.01 else left)
    bottom, right = (1.0 if bottom > 0.99 else bottom), (1.0 if right > 0.99 else right)
    return MarginBox(top, bottom, left, right)


# ------------------------------------------------------------------------------------------ known borders


def test_pillars_of_a_4_3_picture_with_noisy_border():
    height, width = 150, 200  # 4:3, black pillars of 12 % of the width each side, noise up to 8 levels
    pillar = round(0.12 * width)
    frames = _frames(_box_mask(height, width, 0, height, pillar, width - pillar))
    box = detect_black_margin(frames)
    assert box == MarginBox(0.0, 1.0, 0.12, 0.88)
    assert box.pixels(height, width) == (0, height, pillar, width - pillar)
    assert box.pixels(1080, 1440) == (0, 1080, 173, 1267)  # the same fractions on the full-size frames


def test_letterboxed_16_9_with_a_4_3_picture_centred():
    height, width = 90, 160  # a 4:3 recording shown in a 16:9 frame: pillars of 20 px
    frames = _frames(_box_mask(height, width, 0, height, 20, 140))
    assert detect_black_margin(frames).pixels(height, width) == (0, 90, 20, 140)


def test_16_9_with_black_bars_top_and_bottom():
    height, width = 144, 256  # a 2.37:1 picture letterboxed in 16:9: bars of 18 rows
    frames = _frames(_box_mask(height, width, 18, 126, 0, width))
    box = detect_black_margin(frames)
    assert box.pixels(height, width) == (18, 126, 0, 256)
    assert (box.left, box.right) == (0.0, 1.0)


def test_circular_endoscope_field_gives_the_disc_bounding_box():
    height, width, cy, cx, radius = 120, 160, 60, 80, 50
    y, x = np.mgrid[:height, :width]
    disc = (y + 0.5 - cy) ** 2 + (x + 0.5 - cx) ** 2 <= radius**2
    y0, y1, x0, x1 = detect_black_margin(_frames(disc)).pixels(height, width)
    expected = (cy - radius, cy + radius, cx - radius, cx + radius)
    assert np.abs(np.subtract((y0, y1, x0, x1), expected)).max() <= 2, (y0, y1, x0, x1)


def test_all_black_video_is_the_full_frame():
    dark = _frames(np.zeros((60, 80), dtype=bool))  # noise up to 8 levels, all below the threshold
    assert detect_black_margin(dark).is_full
    assert detect_black_margin(torch.zeros(3, 3, 60, 80, dtype=torch.uint8)).is_full
    assert detect_black_margin(torch.zeros(0, 3, 60, 80, dtype=torch.uint8)).is_full


def test_dark_picture_regions_above_the_threshold_are_not_cut():
    height, width = 100, 160
    frames = _frames(_box_mask(height, width, 0, height, 20, 140))
    frames[:, :, :, 20:60] = 20  # a dim stretch of the field at its left edge: grey 20 > 15
    frames[:, :, 30:70, 60:100] = 18  # and a dim patch inside it
    assert detect_black_margin(frames).pixels(height, width) == (0, 100, 20, 140)
    frames[:, :, :, 20:60] = 12  # below the threshold: border
    assert detect_black_margin(frames).pixels(height, width) == (0, 100, 60, 140)


def test_margins_thinner_than_one_percent_are_none():
    frames = _frames(_box_mask(100, 300, 0, 100, 2, 298))  # 2 px of 300 each side: under 1 %
    assert detect_black_margin(frames).is_full


def test_a_border_seen_in_some_frames_only_is_averaged_over_the_video():
    # an instrument crossing the border in one frame of four: its mean grey stays under the threshold
    frames = _frames(_box_mask(80, 120, 0, 80, 10, 110))
    frames[0, :, :, :10] = 30
    assert detect_black_margin(frames).pixels(80, 120) == (0, 80, 10, 110)


@pytest.mark.parametrize("seed", range(8))
def test_equals_the_loop_formulation(seed):
    rng = np.random.default_rng(100 + seed)
    height, width = int(rng.integers(40, 120)), int(rng.integers(40, 160))
    y0, x0 = int(rng.integers(0, height // 4)), int(rng.integers(0, width // 4))
    y1, x1 = height - int(rng.integers(0, height // 4)), width - int(rng.integers(0, width // 4))
    picture = _box_mask(height, width, y0, y1, x0, x1) & (rng.random((height, width)) < 0.3)  # sparse
    frames = _frames(picture, seed=seed)
    assert detect_black_margin(frames) == reference_box(frames)
    assert detect_black_margin(frames, threshold=100, min_fraction=0.2) == reference_box(frames, 100, 0.2)


def test_bad_frames_are_one_line():
    with pytest.raises(DataError, match="uint8 frames") as info:
        detect_black_margin(torch.zeros(2, 3, 8, 8))
    assert "\n" not in str(info.value)
    with pytest.raises(DataError, match="3, H, W"):
        detect_black_margin(torch.zeros(2, 4, 8, 8, dtype=torch.uint8))


# ------------------------------------------------------------------------------------------------ the box


def test_box_round_trip_pixels_and_crop():
    box = MarginBox(0.1, 0.9, 0.125, 0.875)
    assert MarginBox.from_dict(box.to_dict()) == box and MarginBox.from_dict({}).is_full
    assert box.pixels(100, 200) == (10, 90, 25, 175)
    assert MarginBox(0.999, 1.0, 0.0, 0.001).pixels(10, 10) == (9, 10, 0, 1)  # at least one pixel, inside
    images = torch.arange(2 * 3 * 100 * 200, dtype=torch.int32).reshape(2, 3, 100, 200)
    assert torch.equal(crop_margin(images, box), images[..., 10:90, 25:175])
    assert crop_margin(images, MarginBox()) is images
    with pytest.raises(DataError, match="top < bottom"):
        MarginBox(0.5, 0.5)


def test_the_plan_cuts_the_margin_before_its_resize():
    frames = _frames(_box_mask(120, 200, 12, 108, 20, 180))
    box = detect_black_margin(frames)
    for config in (DataConfig.for_size(32), DataConfig.whole_frame(32)):
        plain = frame_plan(config)
        cropped = dataclasses.replace(frame_plan(config, crop_black_margin=True), margin=box)
        expected = resize_and_crop(frames[..., 12:108, 20:180], plain)
        assert torch.equal(resize_and_crop(frames, cropped), expected)
        assert not torch.equal(resize_and_crop(frames, plain), expected)
    # resize on decode: the decoded frame has the resize side, but the cut one no longer does
    on_decode = dataclasses.replace(frame_plan(DataConfig.for_size(32), resize_on_decode=True), margin=box)
    decoded = resize_and_crop(frames, dataclasses.replace(on_decode, margin=None, crop=(120, 120)))
    assert tuple(resize_and_crop(decoded, on_decode).shape[-2:]) == (32, 32)


# ------------------------------------------------------------------------------------------------ decoding


def test_a_frame_folder_video_margin(tmp_path):
    folder = tmp_path / "frames"
    folder.mkdir()
    frames = _frames(_box_mask(96, 160, 0, 96, 16, 144))
    for i, frame in enumerate(frames):
        Image.fromarray(frame.permute(1, 2, 0).numpy()).save(folder / f"{i:04d}.png")
    sample = margin_sample(folder, folder_fps=1.0)  # 0.5 fps: every other image, shorter side 128
    assert sample.shape == (2, 3, 128, 213) and sample.dtype == torch.uint8
    box = detect_video_margin(folder, folder_fps=1.0)
    assert np.abs(np.subtract(box.pixels(96, 160), (0, 96, 16, 144))).max() <= 1


# ------------------------------------------------------------------ issue 44: fades and borders that change


def _bordered(pillar: int, level: float = 1.0, height: int = 48, width: int = 64):
    """uint8 HWC RGB frame i: black pillars of `pillar` px each side, the picture between them a texture
    that moves per frame (levels 60-200) scaled by `level` (0 = black: a fade)."""

    def image_at(i: int) -> np.ndarray:
        y, x = np.mgrid[:height, :width]
        picture = 60 + (37 * x + 23 * y + 11 * i) % 140
        image = np.zeros((height, width, 3), dtype=np.uint8)
        image[:, pillar : width - pillar] = (level * picture[:, pillar : width - pillar, None]).astype(
            np.uint8
        )
        return image

    return image_at


def _video(path, seconds: int, fps: int, frame_at) -> Path:
    """An H.264 MP4 of `seconds` at `fps`, a keyframe every 10 frames (so that seeking is cheap)."""
    options = {"crf": "18", "preset": "ultrafast", "g": "10", "threads": "1"}
    return write_video(path, frame_at, seconds * fps, fps=fps, options=options)


def test_a_video_that_fades_in_from_black_gets_the_box_of_its_picture(tmp_path):
    """The box is found on several frames over the first 64 s, not on the first one: a video black at its
    start (a fade-in) still has its pillars cut."""
    fade_frames = 20  # 10 s at 2 fps, from black to the full picture

    def frame_at(i: int) -> np.ndarray:
        return _bordered(8, level=min(i / fade_frames, 1.0))(i)

    path = _video(tmp_path / "fade.mp4", 70, 2, frame_at)
    sample = margin_sample(path)
    assert len(sample) == MARGIN_FRAMES  # 32 frames at 0.5 fps: the first 64 s
    assert detect_black_margin(sample[:1]).is_full  # the first sampled frame alone is black: no box
    box = detect_video_margin(path)
    assert np.abs(np.subtract(box.pixels(48, 64), (0, 48, 8, 56))).max() <= 1, box


@pytest.fixture
def warnings_seen(caplog, monkeypatch):
    monkeypatch.setattr(logger, "propagate", True)  # a CLI run earlier in this process turned it off
    caplog.set_level(logging.WARNING, logger="plstitch")
    return caplog


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_a_border_that_changes_after_64_s_is_one_warning_naming_the_video_and_both_boxes(
    tmp_path, warnings_seen
):
    def frame_at(i: int) -> np.ndarray:  # 1 fps: pillars of 8 px for 80 s, then of 16 px (a narrower picture)
        return _bordered(8 if i < 80 else 16)(i)

    path = _video(tmp_path / "zoom.mp4", 150, 1, frame_at)
    first = detect_video_margin(path)
    assert np.abs(np.subtract(first.pixels(48, 64), (0, 48, 8, 56))).max() <= 1
    later = warn_if_margin_changes(path, first, video="video07")
    assert later is not None and np.abs(np.subtract(later.pixels(48, 64), (0, 48, 16, 48))).max() <= 1
    (line,) = _warnings(warnings_seen)
    assert line.startswith("video07: the black margin changes after the first 64 s") and "\n" not in line
    assert f"left {first.left:.3f}" in line and f"left {later.left:.3f}" in line
    # the stretches measured: after 64 s, spread to the end, a few frames each (a seek each, no full decode)
    windows = late_margin_samples(path)
    starts = [start for start, _ in windows]
    assert len(windows) == LATE_WINDOWS and starts[0] == 64.0 and starts[-1] == 150 - 8
    assert all(1 <= len(frames) <= 4 for _, frames in windows)


def test_a_steady_border_a_black_ending_and_a_short_video_give_no_warning(tmp_path, warnings_seen):
    steady = _video(tmp_path / "steady.mp4", 100, 1, _bordered(8))
    box = detect_video_margin(steady)
    assert late_margin_samples(steady) and warn_if_margin_changes(steady, box, video="steady") is None
    black_end = _video(tmp_path / "black_end.mp4", 100, 1, lambda i: _bordered(8, level=float(i < 80))(i))
    assert warn_if_margin_changes(black_end, detect_video_margin(black_end), video="black_end") is None
    short = _video(tmp_path / "short.mp4", 40, 1, _bordered(16))
    assert late_margin_samples(short) == [] and warn_if_margin_changes(short, box, video="short") is None
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video")
    assert warn_if_margin_changes(junk, box) is None  # best effort: extraction reports the file itself
    assert _warnings(warnings_seen) == []


def test_a_frame_folder_whose_border_changes_is_warned_about(tmp_path, warnings_seen):
    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(90):  # 1 fps: 90 s, pillars of 8 px, from 70 s on none (a wider picture)
        Image.fromarray(_bordered(8 if i < 70 else 0)(i)).save(folder / f"{i:04d}.png")
    first = detect_video_margin(folder, folder_fps=1.0)
    later = warn_if_margin_changes(folder, first, folder_fps=1.0)
    assert later is not None and later.is_full and not first.is_full
    (line,) = _warnings(warnings_seen)
    assert str(folder) in line and "changes after the first 64 s" in line


def test_margin_moved_tolerates_rounding_only():
    box = MarginBox(0.0, 1.0, 0.125, 0.875)
    assert not margin_moved(box, MarginBox(0.0, 1.0, 0.13, 0.87))  # a pixel of a 128-px sample
    assert margin_moved(box, MarginBox(0.0, 1.0, 0.25, 0.75)) and margin_moved(box, MarginBox())
    frames = torch.zeros(3, 3, 10, 10, dtype=torch.uint8)
    frames[1, :, 2:8, 2:8] = 200
    assert len(lit_frames(frames)) == 1  # the black frames say nothing of the border
