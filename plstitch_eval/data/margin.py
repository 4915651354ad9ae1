"""Black margins of endoscopic frames: find the dark border of a video and describe it as a box.

The "cut margin" step of the TMRNet / Surgformer preprocessing: a pixel whose grey level (ITU-R 601 luma) is
above 15 is picture, the rest is border; the picture's box is cut out before the model's resize and crop.
Here the box is found once per video, from the grey levels averaged over its first frames (a border does not
move within a recording, but differs between recordings and scopes), and kept as fractions of the frame's
height and width, so that a box found on small frames cuts the full-size frames alike.

`detect_black_margin` and `crop_margin` are tensor in, box or tensor out; `margin_sample` and
`detect_video_margin` decode the few small frames the box is found on. `warn_if_margin_changes` measures the
box again on a few short stretches after those 64 s (`late_margin_samples`: a seek each, not a decode of the
video) and warns, naming the video and both boxes, when the border changed: the first box is cut from every
frame.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import av
import numpy as np
import torch
from PIL import Image

from plstitch_eval.data.decoders import PYAV, Decoding, read_frames
from plstitch_eval.data.video import DEFAULT_FOLDER_FPS, list_frame_files, resized_shape
from plstitch_eval.errors import DataError, DecodeError
from plstitch_eval.utils.console import logger

MARGIN_THRESHOLD = 15  # grey level a picture pixel exceeds (TMRNet / Surgformer cut-margin threshold)
MARGIN_MIN_FRACTION = 0.02  # a row or column is picture when more than this share of its pixels is
MARGIN_FRAMES = 32  # frames a video's box is found on ...
MARGIN_FPS = 0.5  # ... sampled at this rate: its first 64 s
MARGIN_SIZE = 128  # shorter side the frames are decoded at (the box is in fractions, so any size will do)
MIN_MARGIN = 0.01  # a margin thinner than this share of a side is no margin (compression noise at borders)
LUMA_WEIGHTS = (0.299, 0.587, 0.114)  # ITU-R BT.601, as OpenCV's and PIL's RGB -> grey
MARGIN_SPAN = MARGIN_FRAMES / MARGIN_FPS  # 64 s: the start of a video its box is found on
LATE_WINDOWS = 4  # stretches after MARGIN_SPAN, over the rest of the video, the box is measured again on
WINDOW_FRAMES = 4  # frames of one stretch, MARGIN_FPS apart (8 s)
MARGIN_CHANGE = 0.02  # a side moved by more than this share of the frame: the border changed


@dataclass(frozen=True)
class MarginBox:
    """The picture inside a frame's black margin, as fractions of its height (`top`, `bottom`) and width
    (`left`, `right`): first kept row / column and end of the kept ones; (0, 1, 0, 1) is the whole frame."""

    top: float = 0.0
    bottom: float = 1.0
    left: float = 0.0
    right: float = 1.0

    def __post_init__(self) -> None:
        for name in ("top", "bottom", "left", "right"):
            object.__setattr__(self, name, float(getattr(self, name)))
        if not (0.0 <= self.top < self.bottom <= 1.0 and 0.0 <= self.left < self.right <= 1.0):
            raise DataError(
                f"A margin box needs 0 <= top < bottom <= 1 and 0 <= left < right <= 1, got {self.to_dict()}."
            )

    @property
    def is_full(self) -> bool:
        """True when the box is the whole frame (nothing to crop)."""
        return (self.top, self.bottom, self.left, self.right) == (0.0, 1.0, 0.0, 1.0)

    def pixels(self, height: int, width: int) -> tuple[int, int, int, int]:
        """(y0, y1, x0, x1) of the box in a `height` x `width` frame: rounded, within it, at least 1 pixel."""
        y0 = min(max(round(self.top * height), 0), height - 1)
        y1 = min(max(round(self.bottom * height), y0 + 1), height)
        x0 = min(max(round(self.left * width), 0), width - 1)
        x1 = min(max(round(self.right * width), x0 + 1), width)
        return y0, y1, x0, x1

    def to_dict(self) -> dict[str, float]:
        """JSON-friendly dict (a store's `black_margins`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MarginBox:
        """Inverse of `to_dict`; a missing side is the frame's edge."""
        return cls(**{k: data[k] for k in ("top", "bottom", "left", "right") if k in data})


def detection_record() -> dict[str, float | int]:
    """The detection settings a feature store's preprocessing records (`crop_black_margin`), so that stores
    made with another detection never mix."""
    return {
        "threshold": MARGIN_THRESHOLD,
        "min_fraction": MARGIN_MIN_FRACTION,
        "frames": MARGIN_FRAMES,
        "fps": MARGIN_FPS,
    }


def detect_black_margin(
    frames: torch.Tensor, threshold: int = MARGIN_THRESHOLD, min_fraction: float = MARGIN_MIN_FRACTION
) -> MarginBox:
    """The picture box of one video's uint8 frames [N, 3, H, W]: rows and columns with more than
    `min_fraction` pixels whose mean grey level over the N frames is above `threshold`, first to last.

    All dark frames (or none) give the whole frame: nothing to crop. Margins thinner than 1 % of a side are
    taken as none (compression noise at frame borders).
    """
    if frames.dtype != torch.uint8 or frames.ndim < 3 or frames.shape[-3] != 3:
        raise DataError(
            f"detect_black_margin expects uint8 frames [N, 3, H, W], got {frames.dtype} "
            f"{tuple(frames.shape)}."
        )
    height, width = frames.shape[-2:]
    frames = frames.reshape(-1, 3, height, width)
    if not len(frames) or not height or not width:
        return MarginBox()
    sums = frames.sum(dim=0, dtype=torch.int64).double()  # [3, H, W], exact
    red, green, blue = LUMA_WEIGHTS
    grey = (red * sums[0] + green * sums[1] + blue * sums[2]) / len(frames)  # mean luma over the frames
    bright = grey > threshold
    rows = torch.nonzero(bright.sum(dim=1) > min_fraction * width).flatten()
    cols = torch.nonzero(bright.sum(dim=0) > min_fraction * height).flatten()
    if not len(rows) or not len(cols):
        return MarginBox()
    top, bottom = _thin_as_none(int(rows[0]) / height, (int(rows[-1]) + 1) / height)
    left, right = _thin_as_none(int(cols[0]) / width, (int(cols[-1]) + 1) / width)
    return MarginBox(top, bottom, left, right)


def _thin_as_none(start: float, end: float) -> tuple[float, float]:
    """(start, end) of one axis with a margin thinner than `MIN_MARGIN` moved to the frame's edge."""
    return (0.0 if start < MIN_MARGIN else start), (1.0 if 1.0 - end < MIN_MARGIN else end)


def crop_margin(images: torch.Tensor, box: MarginBox) -> torch.Tensor:
    """uint8 [..., 3, H, W] -> [..., 3, h, w]: the box of every image (a view; the whole frame as it is)."""
    if box.is_full:
        return images
    y0, y1, x0, x1 = box.pixels(*images.shape[-2:])
    return images[..., y0:y1, x0:x1]


def margin_sample(
    source: str | os.PathLike,
    *,
    folder_fps: float | None = None,
    threads: int = 0,
    decoding: Decoding = PYAV,
) -> torch.Tensor:
    """uint8 [n, 3, h, w]: the first `MARGIN_FRAMES` frames of a video file or frame folder sampled at
    `MARGIN_FPS`, decoded small (shorter side `MARGIN_SIZE`) on the CPU by the run's decoder."""
    frames = read_frames(
        source, MARGIN_FPS, MARGIN_SIZE, folder_fps=folder_fps, threads=threads, decoding=decoding.on_cpu()
    )
    try:
        # copied (torch.tensor): decoded arrays may be read-only
        images = [torch.tensor(frame.image).permute(2, 0, 1) for frame in islice(frames, MARGIN_FRAMES)]
    finally:
        close = getattr(frames, "close", None)
        if close is not None:  # stop the decoder (and close the file) after the frames taken
            close()
    if not images:
        raise DecodeError(f"{source}: no frames could be decoded; the file is corrupt or empty")
    return torch.stack(images)


def detect_video_margin(
    source: str | os.PathLike,
    *,
    folder_fps: float | None = None,
    threads: int = 0,
    decoding: Decoding = PYAV,
) -> MarginBox:
    """The black-margin box of one video (`detect_black_margin` of its `margin_sample`)."""
    sample = margin_sample(source, folder_fps=folder_fps, threads=threads, decoding=decoding)
    return detect_black_margin(sample)


# ------------------------------------------------------------------------------- a border that changes later


def late_margin_samples(
    source: str | os.PathLike, *, folder_fps: float | None = None
) -> list[tuple[float, torch.Tensor]]:
    """(start in s, uint8 [n, 3, h, w]) of up to `LATE_WINDOWS` stretches of the video after its first
    `MARGIN_SPAN` seconds, spread evenly over the rest of it (the last one at its end): `WINDOW_FRAMES` frames
    `MARGIN_FPS` apart each, decoded small (shorter side `MARGIN_SIZE`) by PyAV on the CPU. Empty for a video
    of `MARGIN_SPAN` seconds or less.

    Short stretches, so that each shows the border of its own time (frames spread over the whole video would
    average a border that changes half-way with the one before). Cheap: a frame folder loads those images; a
    video file seeks to each stretch (to the keyframe before it), never decoding the whole video.
    """
    path = Path(source)
    if path.is_dir():
        rate = float(folder_fps) if folder_fps else DEFAULT_FOLDER_FPS
        files = list_frame_files(path)
        windows = []
        for start in _window_starts(len(files) / rate):
            picks = sorted({round((start + j / MARGIN_FPS) * rate) for j in range(WINDOW_FRAMES)})
            picks = [i for i in picks if i < len(files)]
            if picks:
                windows.append((start, torch.stack([_small_image(files[i]) for i in picks])))
        return windows
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"  # FFmpeg's frame and slice threads: the stretches decode on every core
        base, origin = stream.time_base, stream.start_time or 0
        if stream.duration is not None and base is not None:
            duration = float(stream.duration * base)
        else:
            duration = (container.duration or 0) / av.time_base
        if base is None:
            return []
        windows = []
        for start in _window_starts(duration):
            container.seek(origin + int(start / base), stream=stream)  # to the keyframe at or before it
            targets = [start + j / MARGIN_FPS for j in range(WINDOW_FRAMES)]
            images: list[torch.Tensor] = []
            for frame in container.decode(stream):
                time = float((frame.pts - origin) * base) if frame.pts is not None else None
                if time is None or time < targets[0] - 1e-6:
                    continue
                while targets and time >= targets[0] - 1e-6:  # a frame covering several targets: once
                    targets.pop(0)
                width, height = resized_shape(frame.width, frame.height, MARGIN_SIZE)
                rgb = frame.to_ndarray(format="rgb24", width=width, height=height)
                images.append(torch.from_numpy(rgb).permute(2, 0, 1))
                if not targets:
                    break
            if images:
                windows.append((start, torch.stack(images)))
        return windows


def _window_starts(duration: float) -> list[float]:
    """Start times of the `late_margin_samples` stretches of a video of `duration` seconds."""
    if duration <= MARGIN_SPAN:
        return []
    last = max(MARGIN_SPAN, duration - WINDOW_FRAMES / MARGIN_FPS)
    return sorted({round(float(t), 3) for t in np.linspace(MARGIN_SPAN, last, LATE_WINDOWS)})


def _small_image(file: Path) -> torch.Tensor:
    """uint8 [3, h, w]: one frame-folder image, its shorter side resized to `MARGIN_SIZE` (bilinear)."""
    with Image.open(file) as image:
        rgb = image.convert("RGB")
    rgb = rgb.resize(resized_shape(*rgb.size, MARGIN_SIZE), Image.BILINEAR)
    return torch.from_numpy(np.array(rgb, dtype=np.uint8)).permute(2, 0, 1)


def lit_frames(frames: torch.Tensor) -> torch.Tensor:
    """The frames of uint8 [N, 3, H, W] with a picture: more than `MARGIN_MIN_FRACTION` of their pixels above
    the grey `MARGIN_THRESHOLD` (a black frame - a fade, a scope taken out - says nothing of the border)."""
    red, green, blue = LUMA_WEIGHTS
    grey = red * frames[:, 0].double() + green * frames[:, 1].double() + blue * frames[:, 2].double()
    bright = (grey > MARGIN_THRESHOLD).flatten(1).double().mean(dim=1)
    return frames[bright > MARGIN_MIN_FRACTION]


def margin_moved(first: MarginBox, later: MarginBox, tolerance: float = MARGIN_CHANGE) -> bool:
    """Whether a side of `later` is more than `tolerance` (a share of the frame) away from `first`'s."""
    sides = ("top", "bottom", "left", "right")
    return any(abs(getattr(first, side) - getattr(later, side)) > tolerance for side in sides)


def warn_if_margin_changes(
    source: str | os.PathLike,
    box: MarginBox,
    *,
    video: str | None = None,
    folder_fps: float | None = None,
) -> MarginBox | None:
    """Measure the black-margin box of `source` again on stretches after its first 64 s
    (`late_margin_samples`, each one's lit frames); at the first whose box has a side more than
    `MARGIN_CHANGE` away from `box`, log one warning naming `video` (else the file), when, and both boxes,
    and return that box. None when the border holds (or nothing can be compared: a video of 64 s or less,
    only black frames later, a file that cannot be read - the extraction itself reports decoding errors).

    Why: `--crop-black-margin` cuts the box found on the first 64 s from every frame; a border that changes
    later (another scope, a zoom, a picture-in-picture) would be cut wrongly, and silently.
    """
    try:
        windows = late_margin_samples(source, folder_fps=folder_fps)
    except Exception as exc:  # best effort: never stops an extraction
        logger.debug("%s: black-margin check after %g s skipped (%s)", source, MARGIN_SPAN, exc)
        return None
    for start, frames in windows:
        lit = lit_frames(frames)
        if not len(lit):
            continue
        later = detect_black_margin(lit)
        if margin_moved(box, later):
            logger.warning(
                "%s: the black margin changes after the first %g s (box %s there, %s at %.0f s); "
                "--crop-black-margin cuts the first box from every frame: check the video, or extract it "
                "without --crop-black-margin",
                video or source,
                MARGIN_SPAN,
                _box_text(box),
                _box_text(later),
                start,
            )
            return later
    return None


def _box_text(box: MarginBox) -> str:
    """`top 0.000 bottom 1.000 left 0.120 right 0.880`: a box on one line, in fractions of the frame."""
    return " ".join(f"{side} {getattr(box, side):.3f}" for side in ("top", "bottom", "left", "right"))


__all__ = [
    "LATE_WINDOWS",
    "MARGIN_CHANGE",
    "MARGIN_FPS",
    "MARGIN_FRAMES",
    "MARGIN_MIN_FRACTION",
    "MARGIN_SIZE",
    "MARGIN_SPAN",
    "MARGIN_THRESHOLD",
    "WINDOW_FRAMES",
    "MarginBox",
    "crop_margin",
    "detect_black_margin",
    "detect_video_margin",
    "detection_record",
    "late_margin_samples",
    "lit_frames",
    "margin_moved",
    "margin_sample",
    "warn_if_margin_changes",
]
