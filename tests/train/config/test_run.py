"""`RunConfig`: checkpoint and log cadence and worker count checked on construction."""

from __future__ import annotations

import pytest

from plstitch_train.config import RunConfig
from tests.train.config.checks import refused


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"checkpoint_every": 0}, "checkpoint_every"),
        ({"log_every": 0}, "log_every"),
        ({"num_workers": -1}, "num_workers"),
    ],
)
def test_bad_values_are_refused_naming_the_field(values: dict, field: str) -> None:
    refused(RunConfig, field, **values)


def test_defaults() -> None:
    assert RunConfig() == RunConfig(seed=0, device="auto", precision="auto", num_workers=4)
