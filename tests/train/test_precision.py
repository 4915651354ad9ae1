"""Mixed precision on CPU: bf16 autocast trains (finite losses, parameters move, numbers differ from fp32);
fp16 runs with an enabled GradScaler; an unknown precision is one ConfigError line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME
from plstitch_train.model import PLStitchModel
from plstitch_train.trainer import TrainResult, load_training_checkpoint, seed_everything, train
from tests.train.conftest import tiny_config

STEPS = 2
LOSS_KEYS = ("loss", "vid", "mim", "jigsaw")


@pytest.fixture(scope="module")
def fp32_run(video_dir: Path, frame_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> TrainResult:
    config = tiny_config(video_dir, frame_cache, batch_size=16, max_steps=STEPS, precision="fp32")
    return train(config, tmp_path_factory.mktemp("fp32"))


def _initial_state(config) -> dict[str, torch.Tensor]:
    seed_everything(config.seed)  # as the trainer does before building the model
    return {k: v.detach().clone() for k, v in PLStitchModel(config).state_dict().items()}


def _check_trained(result: TrainResult, config, run_dir: Path, steps: int = STEPS) -> dict:
    """Finite losses on every step, and the student's backbone and heads moved away from their start."""
    assert result.step == steps and len(result.history) == steps
    for record in result.history:
        for key in LOSS_KEYS:
            assert math.isfinite(record[key]), (key, record)
    checkpoint = load_training_checkpoint(run_dir / CHECKPOINT_NAME)
    state, initial = checkpoint["model"], _initial_state(config)
    for prefix in ("student.backbone.", "student.ibot_head.mlp.", "teacher.backbone."):
        keys = [k for k in state if k.startswith(prefix) and state[k].is_floating_point()]
        assert keys, prefix
        assert any(not torch.equal(state[k], initial[k]) for k in keys), prefix
    for key, value in state.items():
        if value.is_floating_point():
            assert value.dtype == torch.float32, key  # autocast leaves the master weights in fp32
            assert torch.isfinite(value).all(), key
    return checkpoint


def test_bf16_autocast_trains_on_cpu(
    video_dir: Path, frame_cache: Path, tmp_path: Path, fp32_run: TrainResult
) -> None:
    config = tiny_config(video_dir, frame_cache, batch_size=16, max_steps=STEPS, precision="bf16")
    result = train(config, tmp_path)
    checkpoint = _check_trained(result, config, tmp_path)
    assert checkpoint["scaler"] == {}  # no loss scaling for bf16
    # bf16 really ran: same data and seed, yet the losses are not fp32's bit for bit (but close).
    first_bf16, first_fp32 = result.history[0], fp32_run.history[0]
    assert any(first_bf16[k] != first_fp32[k] for k in LOSS_KEYS)
    for key in LOSS_KEYS:
        assert first_bf16[key] == pytest.approx(first_fp32[key], rel=0.05, abs=0.05), key


def test_fp16_on_cpu_trains_once_the_grad_scaler_has_backed_off(
    video_dir: Path, frame_cache: Path, tmp_path: Path, fp32_run: TrainResult
) -> None:
    """fp16 works on CPU (no error): the GradScaler starts at 2**16, skips the steps whose scaled gradients
    overflow (halving its scale each time), then the optimizer steps as usual."""
    steps = 12
    config = tiny_config(video_dir, frame_cache, batch_size=16, epochs=4, max_steps=steps, precision="fp16")
    result = train(config, tmp_path)
    checkpoint = _check_trained(result, config, tmp_path, steps)
    scale = checkpoint["scaler"].get("scale", 0.0)  # the GradScaler was on (its state is {} when off)
    assert 0 < scale < 2.0**16
    assert math.log2(scale).is_integer()  # only halvings (skipped steps) and doublings
    assert any(result.history[0][k] != fp32_run.history[0][k] for k in LOSS_KEYS)


def test_fp32_run_is_the_reference(fp32_run: TrainResult) -> None:
    assert fp32_run.step == STEPS
    assert all(math.isfinite(r[k]) for r in fp32_run.history for k in LOSS_KEYS)


def test_unknown_precision_is_one_config_error_line(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="precision") as caught:
        config = tiny_config(video_dir, frame_cache, max_steps=1, precision="fp8")
        train(config, tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "fp8" in message and "bf16" in message
