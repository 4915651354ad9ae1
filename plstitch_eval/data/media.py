"""Which files are media: the one home of the video and frame-image extensions.

Training discovery (`plstitch_train.data.discover_videos`), dataset adapters (`find_source`), `predict`'s
folder listing and the decoders (`plstitch_eval.data.video`) all read these objects, so a file is found
exactly when it can be decoded. Video extensions are containers PyAV's bundled FFmpeg demuxes (`.ogv`: Ogg,
`.wmv`: ASF; TorchCodec, an optional decoder, uses the system's FFmpeg, whose stock builds demux them too);
image extensions are formats PIL opens for frame folders (`.webp` needs PIL's WebP support, which its wheels
carry). Order matters where a stem is resolved to the first existing `<stem><ext>`.
"""

from __future__ import annotations

import os
from pathlib import Path

VIDEO_EXTENSIONS: tuple[str, ...] = (
    ".mp4",
    ".avi",
    ".mkv",
    ".mov",
    ".webm",
    ".mpg",
    ".mpeg",
    ".m4v",
    ".ogv",
    ".wmv",
)
IMAGE_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def is_video_file(path: str | os.PathLike) -> bool:
    """True if `path`'s extension (any case) is a video container the decoder reads; no I/O."""
    return Path(path).suffix.lower() in VIDEO_EXTENSIONS


def is_image_file(path: str | os.PathLike) -> bool:
    """True if `path` is a frame image the frame-folder reader takes: a known extension, not a hidden file.

    Hidden files (macOS `._0001.jpg` copies) are skipped: a folder counts as frames only if it is readable.
    """
    path = Path(path)
    return path.suffix.lower() in IMAGE_EXTENSIONS and not path.name.startswith(".")
