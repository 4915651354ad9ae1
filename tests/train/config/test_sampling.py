"""`SamplingConfig`: clip length, frame steps, clips per video and context offsets checked on construction."""

from __future__ import annotations

import pytest

from plstitch_train.config import SamplingConfig
from tests.train.config.checks import refused


def test_defaults_are_the_paper_settings() -> None:
    sampling = SamplingConfig()
    assert (sampling.clip_len, sampling.min_step, sampling.max_step) == (8, 1, 20)
    assert sampling.context_seconds == (1.5, 2.5) and sampling.clips_per_video == (60, 200, 300)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"clip_len": 1}, "clip_len"),
        ({"min_step": 0}, "min_step"),
        ({"min_step": 5, "max_step": 4}, "max_step"),
        ({"context_seconds": (0.0, 1.0)}, "context_seconds"),
        ({"context_seconds": (2.0, 1.0)}, "context_seconds"),
        ({"clip_length_bounds": (960, 240)}, "clip_length_bounds"),
        ({"clips_per_video": (0, 1, 2)}, "clips_per_video"),
    ],
)
def test_bad_values_are_refused_naming_the_field(values: dict, field: str) -> None:
    refused(SamplingConfig, field, **values)


def test_lists_become_tuples_so_json_settings_compare_equal() -> None:
    from_json = SamplingConfig.from_dict({"context_seconds": [0.5, 1.5], "clips_per_video": [1, 2, 3]})
    assert from_json.context_seconds == (0.5, 1.5) and from_json.clips_per_video == (1, 2, 3)
    assert from_json == SamplingConfig(context_seconds=(0.5, 1.5), clips_per_video=(1, 2, 3))
    assert from_json.to_dict()["context_seconds"] == [0.5, 1.5]  # plain JSON back
