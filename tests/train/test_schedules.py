"""`plstitch_train.schedules.Schedules` and the teacher temperature warm-up against formulas written here.

The reference below is DINO's `cosine_scheduler` written out per step: lr peaks at base_lr * batch / 256
after a linear warm-up from 0 over round(warmup_epochs * steps_per_epoch) steps (np.linspace: the last
warm-up step already holds the peak), then follows a half cosine to min_lr; weight decay and teacher
momentum follow the same cosine with no warm-up (momentum ending at 1).
"""

from __future__ import annotations

import math

import pytest
import torch

from plstitch_train.losses import IBOTLoss
from plstitch_train.model import PLStitchModel
from plstitch_train.presets import get_preset
from plstitch_train.schedules import Schedules


def _cosine(base: float, final: float, step: int, total: int, warmup: int = 0) -> float:
    """Value at `step` of a schedule with a linear warm-up 0 -> base over `warmup` steps, then a cosine."""
    if step < warmup:
        return base * step / max(warmup - 1, 1)
    t = (step - warmup) / (total - warmup)
    return final + 0.5 * (base - final) * (1 + math.cos(math.pi * t))


# (total_steps, steps_per_epoch, warmup_epochs, warm-up steps as written out by hand)
CASES = [
    (40, 10, 1.0, 10),
    (40, 10, 0.0, 0),
    (30, 4, 1.25, 5),  # fractional epochs: 1.25 x 4 steps
    (24, 3, 2.7, 8),  # 8.1 steps -> 8
    (20, 8, 0.5, 4),
]


@pytest.mark.parametrize(("total", "per_epoch", "warmup_epochs", "warmup"), CASES)
def test_lr_is_scaled_warmed_up_then_cosine(
    total: int, per_epoch: int, warmup_epochs: float, warmup: int
) -> None:
    base_lr, min_lr, batch = 5e-4, 1e-6, 96
    schedules = Schedules(
        total,
        per_epoch,
        base_lr=base_lr,
        min_lr=min_lr,
        warmup_epochs=warmup_epochs,
        weight_decay=0.04,
        weight_decay_end=0.4,
        momentum_teacher=0.996,
        batch_size=batch,
    )
    peak = base_lr * batch / 256
    assert len(schedules) == total
    steps = {0, max(warmup - 1, 0), warmup, warmup + 1, (warmup + total) // 2, total - 1}
    for step in sorted(steps):
        assert schedules.lr[step] == pytest.approx(_cosine(peak, min_lr, step, total, warmup), rel=1e-9)
    if warmup:
        assert schedules.lr[0] == 0.0
        assert schedules.lr[warmup - 1] == pytest.approx(peak)  # the warm-up ends on the peak
        assert schedules.lr[:warmup].tolist() == pytest.approx(
            [_cosine(peak, min_lr, i, total, warmup) for i in range(warmup)]
        )
    else:
        assert schedules.lr[0] == pytest.approx(peak)
    assert max(schedules.lr) == pytest.approx(peak)
    assert schedules.lr[-1] > min_lr  # the cosine approaches min_lr from above, one step short of it


def test_weight_decay_and_momentum_are_cosines_without_warmup() -> None:
    total = 50
    schedules = Schedules(
        total,
        10,
        base_lr=4e-4,
        min_lr=1e-6,
        warmup_epochs=2.0,  # warms up lr only
        weight_decay=0.04,
        weight_decay_end=0.4,
        momentum_teacher=0.996,
        batch_size=256,
    )
    for step in (0, 1, 19, 20, 25, 37, total - 1):
        assert schedules.weight_decay[step] == pytest.approx(_cosine(0.04, 0.4, step, total), rel=1e-9)
        assert schedules.momentum[step] == pytest.approx(_cosine(0.996, 1.0, step, total), rel=1e-12)
    assert schedules.weight_decay[0] == pytest.approx(0.04)
    assert schedules.momentum[0] == pytest.approx(0.996)
    assert schedules.weight_decay[-1] == pytest.approx(0.4, abs=1e-3)
    assert schedules.momentum[-1] == pytest.approx(1.0, abs=1e-5)
    assert all(0.996 <= m <= 1.0 for m in schedules.momentum)


def _temperature(warmup_temp: float, temp: float, epoch: int, warmup_epochs: int) -> float:
    """DINO: np.linspace(warmup_temp, temp, warmup_epochs) over the first epochs, then `temp`."""
    if epoch >= warmup_epochs:
        return temp
    return warmup_temp + (temp - warmup_temp) * epoch / max(warmup_epochs - 1, 1)


def test_teacher_temperature_warms_up_per_epoch() -> None:
    loss = IBOTLoss(
        8,
        8,
        teacher_temp=0.07,
        warmup_teacher_temp=0.04,
        teacher_patch_temp=0.06,
        warmup_teacher_patch_temp=0.03,
        warmup_epochs=5,
        n_epochs=12,
    )
    for epoch in (0, 1, 2, 4, 5, 6, 11):
        cls_temp, patch_temp = loss.temperatures(epoch)
        assert cls_temp == pytest.approx(_temperature(0.04, 0.07, epoch, 5))
        assert patch_temp == pytest.approx(_temperature(0.03, 0.06, epoch, 5))
    assert loss.temperatures(4) == pytest.approx((0.07, 0.06))  # the last warm-up epoch reaches the target
    assert loss.temperatures(3)[0] == pytest.approx(0.0625)
    assert loss.temperatures(2.9) == loss.temperatures(2)  # a fractional epoch uses its whole epoch
    assert loss.temperatures(40) == pytest.approx((0.07, 0.06))  # past the last epoch: the final value


def test_model_builds_the_temperature_schedule_from_the_config() -> None:
    config = get_preset("tiny-cpu").replace(
        model_args={"patch_size": 8, "embed_dim": 32, "depth": 1, "num_heads": 2},
        img_size=32,
        ibot_out_dim=16,
        ibot_hidden_dim=16,
        ibot_bottleneck_dim=8,
        epochs=6,
        warmup_teacher_temp=0.02,
        teacher_temp=0.05,
        warmup_teacher_patch_temp=0.01,
        teacher_patch_temp=0.04,
        warmup_teacher_temp_epochs=4,
    )
    torch.manual_seed(0)
    loss = PLStitchModel(config).ibot_loss
    for epoch in range(8):
        cls_temp, patch_temp = loss.temperatures(epoch)
        assert cls_temp == pytest.approx(_temperature(0.02, 0.05, epoch, 4))
        assert patch_temp == pytest.approx(_temperature(0.01, 0.04, epoch, 4))
