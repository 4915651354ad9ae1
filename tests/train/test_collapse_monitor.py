"""The collapse monitor: its measures are `collapse_probe`'s, it warns (and stops) a collapsing run, stays
silent on a healthy one, and leaves what a run computes unchanged."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, LOG_NAME
from plstitch_eval.utils.console import logger
from plstitch_train.config import TrainConfig
from plstitch_train.model import PLStitchModel
from plstitch_train.monitors.collapse import COLLAPSE_EXIT_CODE, CONSECUTIVE, CollapseMonitor, CollapseStop
from plstitch_train.monitors.collapse_probe import collapse_measures
from plstitch_train.trainer import load_training_checkpoint, train
from tests.train.conftest import tiny_config

# A teacher temperature far above the head's logit spread (~0.1-0.2 here) makes the sharpened teacher uniform
# from the start: the student learns the uniform output and the iBOT loss reaches 2 log K (the collapse of
# docs/reproduce.md, "Why MIM alone collapses here", reached in tens of steps instead of hundreds).
HOT_TEACHER = {
    "teacher_temp": 1.0,
    "warmup_teacher_temp": 1.0,
    "teacher_patch_temp": 1.0,
    "warmup_teacher_patch_temp": 1.0,
}
STEPS = 40  # tiny_config trains 2 epochs of 14 steps: EPOCHS makes room for them
EPOCHS = 3


def _collapsing_config(video_dir: Path, frame_cache: Path, **settings: object) -> TrainConfig:
    """MIM only with the hot teacher, STEPS steps: the run that collapses within its first checks."""
    return tiny_config(
        video_dir,
        frame_cache,
        lambda_vid=0.0,
        lambda_jigsaw=0.0,
        max_steps=STEPS,
        epochs=EPOCHS,
        **HOT_TEACHER,
        **settings,
    )


@pytest.fixture
def warnings_seen() -> Iterator[list[str]]:
    """The package logger's WARNING lines while the test runs (it does not propagate to caplog)."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep(level=logging.WARNING)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(min(level or logging.INFO, logging.INFO))
    yield seen
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_the_monitor_measures_what_collapse_probe_measures(video_dir: Path, frame_cache: Path) -> None:
    config = tiny_config(video_dir, frame_cache, collapse_every=5)
    torch.manual_seed(0)
    model = PLStitchModel(config).train()
    crops = torch.randn(3, 2, 3, 32, 32)  # [B, views, 3, H, W], as a batch holds them
    monitor = CollapseMonitor(model, config)
    monitor.keep_probe({"crops": crops})
    monitor.keep_probe({"crops": torch.zeros_like(crops)})  # the first batch stays the probe
    assert monitor.measure(4) is None  # not a measuring step
    state = torch.get_rng_state()
    got = monitor.measure(5, mim_loss=4.0, epoch=0)
    assert torch.equal(torch.get_rng_state(), state)  # no random number drawn
    assert model.teacher.training is False and model.student.training is True

    with torch.no_grad():
        images = crops.transpose(0, 1).flatten(0, 1)
        tokens = model.teacher["backbone"](images)
        head = model.teacher["ibot_head"]
        bottleneck = F.normalize(head.mlp(tokens[:, 0]), dim=-1)
        logits = head.last_layer(bottleneck)
    temperature = model.ibot_loss.temperatures(0)[0]
    expected = collapse_measures(tokens[:, 0], bottleneck, logits, model.ibot_loss.center, temperature)
    assert {k: got[f"collapse_{k}"] for k in expected} == pytest.approx(expected, rel=1e-5, abs=1e-6)
    k = config.ibot_out_dim
    assert got["collapse_entropy_ratio"] == pytest.approx(expected["teacher_entropy"] / math.log(k))
    assert got["collapse_mim_loss_ratio"] == pytest.approx(4.0 / (2 * expected["uniform_entropy"]))
    # without the iBOT branch there is nothing to measure: the monitor is off
    plain = tiny_config(video_dir, frame_cache, lambda_mim=0.0)
    off = CollapseMonitor(PLStitchModel(plain), plain)
    off.keep_probe({"crops": crops})
    assert not off.enabled and off.measure(50) is None


def test_a_collapsing_run_is_warned_about_and_stopped_with_its_checkpoint(
    video_dir: Path, frame_cache: Path, tmp_path: Path, warnings_seen: list[str]
) -> None:
    """MIM only with a hot teacher (measured 2026-11-28): the entropy ratio is >= 0.99 from the first check
    and the iBOT loss passes 0.98 x 2 log K from the first checks on: the warning came at step 10."""
    config = _collapsing_config(video_dir, frame_cache, collapse_every=5)
    result = train(config, tmp_path / "warned")
    assert result.step == STEPS  # warned, not stopped
    warned = [line for line in warnings_seen if "iBOT teacher collapsed" in line]
    assert len(warned) == 1, warnings_seen  # one warning, however long it stays collapsed
    assert "centering=sinkhorn_knopp" in warned[0] and "--init ibot-tiny-synthetic" in warned[0]
    step = int(warned[0].split("collapsed at step ")[1].split(" ")[0])
    assert 5 * CONSECUTIVE <= step <= 30
    log = [json.loads(line) for line in (tmp_path / "warned" / LOG_NAME).read_text().splitlines()]
    measured = [r for r in log if "collapse_teacher_entropy" in r]
    assert [r["step"] for r in measured] == list(range(5, STEPS + 1, 5))

    with pytest.raises(CollapseStop) as stop:
        train(config.replace(stop_on_collapse=True), tmp_path / "stopped")
    assert stop.value.step == step and stop.value.exit_code == COLLAPSE_EXIT_CODE == 3
    saved = load_training_checkpoint(tmp_path / "stopped" / CHECKPOINT_NAME)
    assert saved["step"] == step and not (tmp_path / "stopped" / "backbone").exists()
    assert "teacher collapsed: stopped at step" in stop.value.message()


def test_the_cli_stops_on_collapse_with_one_line_and_exit_code_3(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = _collapsing_config(video_dir, frame_cache)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    out = tmp_path / "cli"
    args = ["train", "--config", str(config_file), "--out", str(out), "--collapse-every", "5"]
    result = CliRunner().invoke(app, [*args, "--stop-on-collapse"])
    assert result.exit_code == COLLAPSE_EXIT_CODE, result.output
    assert "collapsed: teacher collapsed: stopped at step" in result.output
    assert "Traceback" not in result.output
    assert (out / CHECKPOINT_NAME).exists()


def test_a_healthy_run_gets_no_warning(
    video_dir: Path, frame_cache: Path, tmp_path: Path, warnings_seen: list[str]
) -> None:
    """MIM + L_vid at the preset's temperatures: entropy ratio 0.47-0.85 over 200 steps (measured)."""
    config = tiny_config(
        video_dir, frame_cache, lambda_jigsaw=0.0, max_steps=STEPS, epochs=EPOCHS, collapse_every=5
    )
    result = train(config, tmp_path / "healthy")
    assert result.step == STEPS
    assert not [line for line in warnings_seen if "collapsed" in line]
    measured = [r for r in result.history if "collapse_entropy_ratio" in r]
    assert len(measured) == STEPS // 5
    assert max(r["collapse_entropy_ratio"] for r in measured) < 0.95


def test_the_monitor_does_not_change_what_a_run_computes(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=4, batch_size=16)
    without = train(config.replace(collapse_every=0), tmp_path / "without")
    measured = train(config.replace(collapse_every=1), tmp_path / "with", stop_after=2)
    resumed = train(resume=tmp_path / "with" / CHECKPOINT_NAME)  # the monitor restarts on resume
    assert all("collapse_teacher_entropy" in r for r in measured.history + resumed.history)
    assert not any("collapse_teacher_entropy" in r for r in without.history)
    keys = ("loss", "vid", "mim", "jigsaw")
    assert [[r[k] for k in keys] for r in without.history] == [
        [r[k] for k in keys] for r in measured.history + resumed.history
    ]
    expected = load_training_checkpoint(tmp_path / "without" / CHECKPOINT_NAME)["model"]
    got = load_training_checkpoint(tmp_path / "with" / CHECKPOINT_NAME)["model"]
    for key in expected:
        assert torch.equal(expected[key], got[key]), key


def _check(collapsed: bool) -> dict[str, float]:
    """One check's measures: collapsed (entropy and iBOT loss both at 0.99 of their uniform values) or
    healthy (0.6 and 0.85, what the healthy run measures)."""
    ratio, loss = (0.99, 0.99) if collapsed else (0.6, 0.85)
    return {
        "collapse_uniform_entropy": math.log(64),
        "collapse_entropy_ratio": ratio,
        "collapse_mim_loss_ratio": loss,
        "collapse_cls_pairwise_cosine": 0.9,
        "collapse_bottleneck_pairwise_cosine": 0.9,
        "collapse_logit_spread": 0.01,
    }


def test_the_alarm_needs_two_collapsed_checks_in_a_row(tmp_path: Path, warnings_seen: list[str]) -> None:
    """The rule written out: collapsed, healthy, collapsed, collapsed -> only the fourth check rings the alarm
    and warns (one collapsed check is no alarm, a healthy one restarts the count); a fifth warns no more."""
    config = tiny_config(tmp_path, tmp_path, collapse_every=5)
    monitor = CollapseMonitor(PLStitchModel(config), config)
    alarms, warned_at = [], []
    for step, collapsed in zip((5, 10, 15, 20, 25), (True, False, True, True, True), strict=True):
        seen = len(warnings_seen)
        alarms.append(monitor.update(_check(collapsed)))
        monitor.warn_once(step, _check(collapsed))
        warned_at += [step for line in warnings_seen[seen:] if "iBOT teacher collapsed" in line]
    assert alarms == [False, False, False, True, True]
    assert warned_at == [20] and monitor.warned
    assert "collapsed at step 20 (2 checks in a row)" in warnings_seen[-1]
