"""One rule, one home: training discovery, adapters, `predict` and the decoders share media.py's sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import plstitch_eval.predict as predict
import plstitch_train.data as train_data
from plstitch_eval.data import media, video
from plstitch_eval.data.datasets import base
from plstitch_eval.errors import DecodeError
from tests.eval.data.media import index_image, write_index_frames
from tests.media import write_video


def _write_video(path: Path, codec: str, n_frames: int = 8, fps: int = 4) -> Path:
    """A tiny video in a container one of the old lists missed (.ogv: VP8, .wmv: WMV2)."""
    return write_video(path, index_image, n_frames, fps=fps, codec=codec)


def test_every_user_shares_the_same_objects() -> None:
    assert video.VIDEO_EXTS is media.VIDEO_EXTENSIONS and video.IMAGE_EXTS is media.IMAGE_EXTENSIONS
    assert base.VIDEO_EXTENSIONS is media.VIDEO_EXTENSIONS
    assert predict.VIDEO_EXTENSIONS is media.VIDEO_EXTENSIONS
    assert predict.is_video_file is media.is_video_file
    assert train_data.VIDEO_EXTENSIONS is media.VIDEO_EXTENSIONS
    assert train_data.is_video_file is media.is_video_file and train_data.is_image_file is media.is_image_file
    assert video.is_image_file is media.is_image_file


def test_extensions_are_lower_case_dotted_and_unique() -> None:
    for extensions in (media.VIDEO_EXTENSIONS, media.IMAGE_EXTENSIONS):
        assert len(set(extensions)) == len(extensions)
        assert all(ext.startswith(".") and ext == ext.lower() for ext in extensions)
    assert {".ogv", ".wmv"} <= set(media.VIDEO_EXTENSIONS)
    assert {".bmp", ".webp"} <= set(media.IMAGE_EXTENSIONS)


def test_helpers_ignore_case_and_hidden_frames() -> None:
    assert media.is_video_file("a/CLIP.OGV") and not media.is_video_file("a/clip.txt")
    assert media.is_image_file("f/0001.WebP") and not media.is_image_file("f/._0001.jpg")


def test_training_and_extraction_find_and_read_the_same_media(tmp_path: Path) -> None:
    root = tmp_path / "data"
    root.mkdir()
    _write_video(root / "clip_ogv.ogv", "libvpx")
    _write_video(root / "clip_wmv.wmv", "wmv2")
    write_index_frames(root / "frames_bmp", 3, pattern="{:04d}.bmp")
    write_index_frames(root / "frames_webp", 3, pattern="{:04d}.WEBP")
    (root / "notes.txt").write_text("not media")
    hidden_only = root / "hidden_only"
    hidden_only.mkdir()
    write_index_frames(hidden_only, 1, pattern="._{:04d}.jpg")

    found = {v.name: v.source for v in train_data.discover_videos(root, folder_fps=1.0)}
    assert sorted(found) == ["clip_ogv", "clip_wmv", "frames_bmp", "frames_webp"]
    assert {name: base.find_source(name, [root]) for name in found} == found
    assert predict.videos_in_folder(root) == [found["clip_ogv"], found["clip_wmv"]]
    with pytest.raises(DecodeError, match="holds no"):
        video.list_frame_files(hidden_only)
    for name, source in found.items():
        frames = list(video.read_frames(source, fps=1.0, folder_fps=1.0))
        assert frames and all(f.image.dtype == np.uint8 for f in frames), name
