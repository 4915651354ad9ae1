"""`OptimConfig`: run length, batch split, step cap and teacher momentum checked on construction."""

from __future__ import annotations

import pytest

from plstitch_train.config import OptimConfig
from plstitch_train.schedules import Schedules, planned_steps
from tests.train.config.checks import refused


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"epochs": 0}, "epochs"),
        ({"max_steps": 0}, "max_steps"),
        ({"batch_size": 0}, "batch_size"),
        ({"accum_steps": 0}, "accum_steps"),
        ({"momentum_teacher": 1.5}, "momentum_teacher"),
        ({"momentum_teacher": -0.1}, "momentum_teacher"),
    ],
)
def test_bad_values_are_refused_naming_the_field(values: dict, field: str) -> None:
    refused(OptimConfig, field, **values)


def test_the_schedules_and_the_step_count_take_the_section_whole() -> None:
    optim = OptimConfig(epochs=3, base_lr=5.12e-3, batch_size=64, warmup_epochs=1.0)
    assert planned_steps(optim, 10) == 30 and planned_steps(optim.replace(max_steps=7), 10) == 7
    schedules = Schedules.from_settings(optim, 30, 10)
    assert len(schedules) == 30 and schedules.lr.max() == pytest.approx(5.12e-3 * 64 / 256)
    assert schedules.momentum[0] == pytest.approx(optim.momentum_teacher)
    assert schedules.weight_decay[0] == pytest.approx(optim.weight_decay)
