"""`plstitch_train/frames_request.py` without the CLI: what `write-lmdb` writes for training frames and for
a dataset's evaluation frames (fps, size, image format), each contradiction refused in one line, and a small
eval-frames LMDB written through `write_lmdb_session`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord, registered_dataset
from plstitch_eval.errors import ConfigError
from plstitch_train.frames_request import (
    DEFAULT_FPS,
    DEFAULT_SIZE,
    FramesRequest,
    eval_videos,
    image_format,
    write_lmdb_session,
)

TOY = "toy-frame-folders"
FOLDER_FPS = 2.0


class ToyFrameFolders(DatasetAdapter):
    """Two videos as frame folders (`<root>/<video>/NNN.png`) at 2 fps, every frame class 0."""

    name = TOY
    class_names = ["only"]
    native_fps = FOLDER_FPS
    default_eval_fps = FOLDER_FPS
    split_schemes = ("all",)

    def _load(self) -> list[VideoRecord]:
        folders = sorted(p for p in self.root.iterdir() if p.is_dir())
        return [
            VideoRecord(p.name, p, np.zeros(4, dtype=np.int64), FOLDER_FPS, folder_fps=FOLDER_FPS)
            for p in folders
        ]

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return {"train": names}


@pytest.fixture
def frames_root(tmp_path: Path):
    """Two frame folders of four 24x16 PNGs each, registered as the toy dataset."""
    root = tmp_path / "frames"
    rng = np.random.default_rng(0)
    for video in ("clip1", "clip2"):
        (root / video).mkdir(parents=True)
        for i in range(4):
            pixels = rng.integers(0, 255, (16, 24, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / video / f"{i:03d}.png")
    with registered_dataset(TOY, ToyFrameFolders):
        yield root


def test_training_frames_default_to_1_fps_256_px_jpeg(frames_root: Path) -> None:
    videos, source, fps, size, chosen = FramesRequest(data=frames_root).check()
    assert [v.name for v in videos] == ["clip1", "clip2"] and source == str(frames_root.resolve())
    assert (fps, size, chosen) == (DEFAULT_FPS, DEFAULT_SIZE, "jpeg")
    assert FramesRequest(data=frames_root, fps=5.0, size=0, image_format="png").check()[2:] == (5.0, 0, "png")


def test_eval_frames_are_the_datasets_rate_at_decoded_size_as_png(frames_root: Path) -> None:
    request = FramesRequest(dataset=TOY, root=frames_root, eval_frames=True)
    videos, source, fps, size, chosen = request.check()
    assert [(v.name, v.folder_fps) for v in videos] == [("clip1", FOLDER_FPS), ("clip2", FOLDER_FPS)]
    assert source == f"{TOY}:{frames_root.resolve()}:None" and (fps, size, chosen) == (FOLDER_FPS, 0, "png")
    same = FramesRequest(dataset=TOY, root=frames_root, eval_frames=True, fps=FOLDER_FPS, size=0)
    assert same.check()[2:] == (FOLDER_FPS, 0, "png")  # the values they would take anyway


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"fps": 3.0}, "--fps 3 contradicts it: leave out --fps"),
        ({"size": 256}, "--size 256 contradicts it: leave out --size."),
        ({"data": Path("videos")}, "--eval-frames writes a dataset's evaluation frames: give --dataset NAME"),
        ({"quality": 90}, "the frames are PNG (the default of --eval-frames caches, lossless)"),
    ],
)
def test_eval_frames_refuse_each_contradiction_in_one_line(frames_root: Path, changes, message) -> None:
    request = FramesRequest(dataset=TOY, root=frames_root, eval_frames=True, **changes)
    with pytest.raises(ConfigError) as caught:
        request.check()
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_image_format_and_quality() -> None:
    assert image_format(None, None, False) == "jpeg" and image_format(None, None, True) == "png"
    assert image_format("jpeg", 95, True) == "jpeg"
    with pytest.raises(ConfigError, match=r"--image-format must be jpeg or png, got 'webp'\."):
        image_format("webp", None, False)
    with pytest.raises(ConfigError, match=r"are PNG: leave out --quality, or add --image-format jpeg"):
        image_format("png", 80, False)


def test_eval_videos_need_a_dataset_not_a_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="give --dataset NAME"):
        eval_videos(None, None, None, None, None)
    with pytest.raises(ConfigError, match="give --dataset NAME"):
        eval_videos(tmp_path, "synthetic", None, None, None)


def test_write_lmdb_session_writes_eval_frames_with_their_times(frames_root: Path, tmp_path: Path) -> None:
    request = FramesRequest(dataset=TOY, root=frames_root, eval_frames=True, decoder="pyav")
    summary = write_lmdb_session(request, tmp_path / "cache")
    assert summary["videos"] == 2 and summary["frames"] == 8 and summary["frame_times"]
    assert summary["out"] == str(tmp_path / "cache")
