"""`plstitch_eval.extract.options.select_videos`: a run takes a split's videos, or the named ones in the
order given; an unknown name is one error naming the dataset and the known videos."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.data.datasets import VideoRecord
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract.options import select_videos


class _Adapter:
    name = "toy"

    def __init__(self, n: int) -> None:
        self.records = [
            VideoRecord(f"v{i:02d}", Path(f"v{i:02d}.mp4"), np.zeros(1, np.int64), 1.0) for i in range(n)
        ]

    def videos(self, split: str | None = None, scheme: str | None = None) -> list[VideoRecord]:
        return self.records if split is None else self.records[: len(self.records) // 2]


def test_every_video_or_a_splits_then_the_named_ones_in_the_order_given():
    adapter = _Adapter(4)
    assert [r.name for r in select_videos(adapter, None, None)] == ["v00", "v01", "v02", "v03"]
    assert [r.name for r in select_videos(adapter, "train", None)] == ["v00", "v01"]
    assert [r.name for r in select_videos(adapter, None, ["v03", "v01"])] == ["v03", "v01"]


def test_an_unknown_video_names_the_dataset_split_and_the_known_ones():
    with pytest.raises(
        ConfigError, match=r"Unknown video\(s\) \['v03'\] in dataset 'toy' split 'train'"
    ) as info:
        select_videos(_Adapter(4), "train", ["v03"])
    assert "known: v00, v01." in str(info.value)
    with pytest.raises(ConfigError, match=r"known: v00, .*v19 \.\.\.\.") as info:
        select_videos(_Adapter(25), None, ["nope"])
    assert "v20" not in str(info.value)
