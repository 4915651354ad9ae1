"""`plstitch_train.videos`: the training videos of a folder or a dataset split, imported by both frame stores
(and still importable from `plstitch_train.data`, their old home)."""

from __future__ import annotations

from pathlib import Path

import pytest

import plstitch_train.data as data
import plstitch_train.videos as videos
from plstitch_eval.errors import ConfigError, DataError


def test_the_names_keep_their_old_home_under_one_name() -> None:
    """`plstitch_train.data` still gives them, under the one name each has (`TrainingVideo`, not the
    `VideoSource` of `plstitch_eval.predict`)."""
    for name in ("TrainingVideo", "select_training_videos", "discover_videos", "dataset_videos"):
        assert getattr(data, name) is getattr(videos, name)
    assert not hasattr(data, "VideoSource") and not hasattr(data, "select_videos")


def test_a_folder_lists_video_files_and_frame_folders(tmp_path: Path) -> None:
    (tmp_path / "a.mp4").write_bytes(b"")
    (tmp_path / "frames" / "b").mkdir(parents=True)
    (tmp_path / "frames" / "b" / "0001.jpg").write_bytes(b"")
    found = videos.discover_videos(tmp_path, folder_fps=25.0)
    assert found == [
        videos.TrainingVideo("a", tmp_path / "a.mp4"),
        videos.TrainingVideo("frames/b", tmp_path / "frames" / "b", 25.0),
    ]
    chosen, source = videos.select_training_videos(tmp_path, None, None, None, 25.0)
    assert chosen == found and source == str(tmp_path.resolve())


def test_a_data_source_is_one_existing_folder_or_one_dataset(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="exactly one data source"):
        videos.select_training_videos(tmp_path, "cholec80", None, None, 1.0)
    with pytest.raises(DataError, match="no video files"):
        videos.discover_videos(tmp_path, 1.0)
    with pytest.raises(DataError, match="not a folder"):
        videos.discover_videos(tmp_path / "missing", 1.0)
