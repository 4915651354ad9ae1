"""Fixtures the benchmark scripts' tests share with the trainer's tests (tiny videos, one frame cache)."""

from tests.train.conftest import frame_cache, video_dir

__all__ = ["frame_cache", "video_dir"]
