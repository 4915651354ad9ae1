"""`FramesConfig` (the data section): frame store, JPEG quality, decoder and fps checked on construction; the
data source only when a run is about to start."""

from __future__ import annotations

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train.config import DECODER_CHOICES, FRAME_STORES, FramesConfig
from tests.train.config.checks import refused


def test_defaults_are_the_paper_settings_and_valid() -> None:
    frames = FramesConfig()
    assert (frames.fps, frames.frame_size, frames.frame_store, frames.decoder) == (1.0, 256, "lmdb", "pyav")
    assert FRAME_STORES == ("lmdb", "raw") and DECODER_CHOICES == ("pyav", "torchcodec", "auto")


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"frame_store": "npy"}, "frame_store"),
        ({"jpeg_quality": 0}, "jpeg_quality"),
        ({"jpeg_quality": 101}, "jpeg_quality"),
        ({"decoder": "ffmpeg"}, "decoder"),
        ({"fps": 0.0}, "fps"),
    ],
)
def test_bad_values_are_refused_naming_the_field(values: dict, field: str) -> None:
    refused(FramesConfig, field, **values)


def test_the_data_source_is_checked_only_when_asked() -> None:
    FramesConfig().replace(data=None, dataset=None)  # a preset names no data yet
    for frames in (FramesConfig(), FramesConfig(data="videos", dataset="cholec80")):
        with pytest.raises(ConfigError, match="exactly one data source"):
            frames.check_source()
    FramesConfig(data="videos").check_source()
    FramesConfig(dataset="cholec80", root="data").check_source()


def test_section_dict_round_trip_and_unknown_keys() -> None:
    frames = FramesConfig(data="videos", fps=2.0)
    assert FramesConfig.from_dict(frames.to_dict()) == frames
    with pytest.raises(ConfigError, match=r"Unknown frames settings \['fsp'\]"):
        FramesConfig.from_dict({"fsp": 2.0})
    with pytest.raises(ConfigError, match="fps"):
        frames.replace(fps=-1.0)
