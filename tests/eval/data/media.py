"""Writers of tiny real media for the data tests: MP4s whose frames encode their index, frame folders."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
from PIL import Image

from tests.media import write_video

LEVELS = 16  # frame i: left half grey (i % 16), right half grey (i // 16), each level 16 apart (tolerant)


def index_image(i: int, width: int = 32, height: int = 32) -> np.ndarray:
    """A frame whose two flat halves encode `i` (0 <= i < 256) robustly to codec rounding and resizing."""
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:, : width // 2] = (i % LEVELS) * 16 + 8
    image[:, width // 2 :] = (i // LEVELS) * 16 + 8
    return image


def decode_index(image: np.ndarray) -> int:
    """Inverse of `index_image`, reading the middle of each half."""
    width = image.shape[1]
    low = float(image[:, width // 8 : 3 * width // 8].mean())
    high = float(image[:, 5 * width // 8 : 7 * width // 8].mean())
    return int(round((high - 8) / 16)) * LEVELS + int(round((low - 8) / 16))


def write_index_video(
    path: Path,
    n_frames: int,
    fps: int | Fraction = 25,
    size: tuple[int, int] = (32, 32),
    pts_ms: Sequence[int] | None = None,
    faststart: bool = False,
    bframes: int = 0,
) -> Path:
    """Lossless (x264 qp 0) MP4 of `n_frames` index frames at `fps` (a Fraction for NTSC rates such as
    30000/1001), or at explicit `pts_ms` times (VFR);
    `bframes` > 0 adds B-frames (x264's pyramid: some are references, the others are not; qp 10)."""
    options = {"qp": "0", "preset": "ultrafast", "bframes": str(bframes), "threads": "1"}
    if bframes:  # lossless coding and ultrafast both turn B-frames off: near-lossless, fixed B-frames
        options.update({"qp": "10", "preset": "veryfast", "b-pyramid": "normal", "b-adapt": "0"})
    return write_video(
        path,
        lambda i: index_image(i, *size),
        n_frames,
        fps=fps,
        options=options,
        container_options={"movflags": "faststart"} if faststart else None,
        pts_ms=pts_ms,
    )


def write_index_frames(folder: Path, n_frames: int, pattern: str = "{:04d}.jpg", start: int = 1) -> Path:
    """A frame folder of index images (png for exact levels, jpg tolerated by `decode_index`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n_frames):
        Image.fromarray(index_image(i)).save(folder / pattern.format(i + start), quality=100)
    return folder
