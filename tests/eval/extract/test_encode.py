"""`plstitch_eval.extract.encode.EncodeLoop`: chunks of a video are encoded as they come and the video is
written, labelled, once its last chunk is in; errors and other runs' videos become results, not writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from plstitch_eval.data.datasets import VideoRecord
from plstitch_eval.errors import DecodeError
from plstitch_eval.extract.chunks import FrameChunk
from plstitch_eval.extract.encode import EncodeLoop
from plstitch_eval.extract.summary import ELSEWHERE
from plstitch_eval.hub import DataConfig
from plstitch_eval.preprocess import frame_plan
from plstitch_eval.store.features import FeatureStore


class _Loader(list):
    """The chunks, and the stream the loop tells which videos are written."""

    def __init__(self, chunks: list[FrameChunk]) -> None:
        super().__init__(chunks)
        self.dataset = self
        self.written: list[int] = []

    def mark_written(self, video_index: int, model: int = 0) -> None:
        assert model == 0
        self.written.append(video_index)


def _chunk(index: int, times: list[float], last: bool, error: str | None = None) -> FrameChunk:
    images = torch.full((len(times), 3, 4, 4), 10 * (index + 1), dtype=torch.uint8)
    return FrameChunk(index, images, torch.tensor(times, dtype=torch.float64), last, error)


def _loop(tmp_path: Path) -> EncodeLoop:
    store = FeatureStore.create(tmp_path / "store", {"feature_dim": 3})
    labels = np.arange(3, dtype=np.int64)  # 3 s of labels at 1 fps: a 4th frame is dropped
    records = [VideoRecord(n, Path(f"/data/{n}.mp4"), labels, 1.0) for n in ("a", "b", "c", "d")]
    encoder = lambda x: x.mean(dim=(2, 3))  # noqa: E731 - [n, 3, h, w] -> [n, 3] features
    return EncodeLoop(
        store, records, encoder, frame_plan(DataConfig.for_size(4), 1.0), torch.device("cpu"), "fp32"
    )


def test_each_video_is_written_when_its_last_chunk_is_in(tmp_path):
    loop = _loop(tmp_path)
    loader = _Loader([
        _chunk(0, [0.0, 1.0], False),
        _chunk(1, [0.0], False, error="/data/b.mp4: broken"),
        _chunk(0, [2.0, 3.0], True),
        FrameChunk(2, torch.empty(0, dtype=torch.uint8), torch.empty(0), False, waiting=True),
        FrameChunk(2, torch.empty(0, dtype=torch.uint8), torch.empty(0), True, elsewhere=True),
    ])  # fmt: skip
    results = list(loop.results(loader, fail_fast=False))
    assert [(r.video, r.status) for r in results] == [("b", "failed"), ("a", "done"), ("c", "skipped")]
    assert results[0].error == "/data/b.mp4: broken" and results[2].note == ELSEWHERE
    assert results[1].frames == 3 and loop.frames == 4 and loader.written == [1, 0]
    item = loop.store.read("a")
    np.testing.assert_array_equal(item.frame_times, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(item.labels, [0, 1, 2])
    assert item.features.shape == (3, 3) and loop.store.videos() == ["a"]


def test_fail_fast_stops_at_the_first_error(tmp_path):
    loader = _Loader([_chunk(3, [0.0], True, error="/data/d.mp4: broken")])
    with pytest.raises(DecodeError, match=r"/data/d.mp4: broken \(stopped: --fail-fast\)"):
        list(_loop(tmp_path).results(loader, fail_fast=True))
