"""DDP: a 2-process gloo run under torchrun matches one process at the same global batch; CLI entry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, LOG_NAME
from plstitch_train.model import PLStitchModel
from plstitch_train.trainer import load_training_checkpoint, seed_everything, train
from tests.train.conftest import assert_states_close, tiny_config

STEPS = 2
REPO = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PLSTITCH_NO_LIVE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


@pytest.mark.timeout(400)
def test_two_process_gloo_run_matches_single_process(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=STEPS, batch_size=4)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    single = train(config, tmp_path / "single")
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "plstitch_eval",
        "train",
        "--config",
        str(config_file),
        "--out",
        str(tmp_path / "ddp"),
    ]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=380, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])  # only rank 0 prints
    assert summary["step"] == STEPS
    assert summary["final"]["loss"] == pytest.approx(single.history[-1]["loss"], rel=1e-4)
    expected = load_training_checkpoint(single.out_dir / CHECKPOINT_NAME)
    got = load_training_checkpoint(tmp_path / "ddp" / CHECKPOINT_NAME)
    assert got["world_size"] == 2 and len(got["rng"]) == 2
    assert_states_close(expected["model"], got["model"])
    # training moved the weights, so the match is not between two untouched initialisations
    seed_everything(config.seed)
    fresh = PLStitchModel(config).state_dict()
    key = "student.backbone.vit.blocks.0.attn.qkv.weight"
    assert not torch.allclose(fresh[key], expected["model"][key], atol=1e-4)
    assert (tmp_path / "ddp" / "backbone" / "model.safetensors").is_file()


def test_python_m_entry_point_reports_errors_as_one_line(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "plstitch_eval",
        "train",
        "--data",
        str(tmp_path / "missing"),
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 1
    assert "error:" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.timeout(300)
def test_sigkill_then_resume_matches_the_uninterrupted_run(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    steps = 40
    config = tiny_config(video_dir, frame_cache, max_steps=steps, epochs=20, checkpoint_every=3)
    reference = train(config, tmp_path / "reference")
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    run_dir = tmp_path / "killed"
    command = [sys.executable, "-m", "plstitch_eval", "train", "--config", str(config_file)]
    command += ["--out", str(run_dir)]
    process = subprocess.Popen(
        command, env=_env(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 200
    while not (run_dir / CHECKPOINT_NAME).exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    killed_at = load_training_checkpoint(run_dir / CHECKPOINT_NAME)["step"]
    assert 0 < killed_at < steps, "the run finished before it could be killed"
    resume = [sys.executable, "-m", "plstitch_eval", "train", "--resume", str(run_dir)]
    done = subprocess.run(resume, env=_env(), capture_output=True, text=True, timeout=200, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = load_training_checkpoint(reference.out_dir / CHECKPOINT_NAME)["model"]
    got = load_training_checkpoint(run_dir / CHECKPOINT_NAME)["model"]
    for key, value in expected.items():
        assert torch.equal(value, got[key]), key
    log = [json.loads(line) for line in (run_dir / LOG_NAME).read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, steps + 1))  # steps after the checkpoint are not doubled


def _torchrun(nproc: int, *args: str) -> list[str]:
    """`torchrun --standalone --nproc_per_node N -m plstitch_eval ARGS` through this interpreter."""
    head = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc)]
    return [*head, "-m", "plstitch_eval", *args]


@pytest.mark.slow
@pytest.mark.timeout(500)
def test_two_process_sigterm_then_resume_with_one_process_matches_uninterrupted(
    video_dir: Path, frame_cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """(a) SIGTERM to torchrun stops both ranks after the same step with one checkpoint and the torchrun
    resume line; (b) that checkpoint resumed by 1 process keeps the global batch: same weights, same log."""
    steps = 20  # few enough that float differences between 2 x 2 and 1 x 4 samples stay within tolerance
    config = tiny_config(video_dir, frame_cache, max_steps=steps, epochs=20, checkpoint_every=2)
    reference = train(config, tmp_path / "reference")
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    run_dir = tmp_path / "ddp"
    command = _torchrun(2, "train", "--config", str(config_file), "--out", str(run_dir))
    process = subprocess.Popen(
        command, env=_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while not (run_dir / CHECKPOINT_NAME).exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)  # to the torchrun agent, which forwards it to both ranks
    _, stderr = process.communicate(timeout=120)
    checkpoint = load_training_checkpoint(run_dir / CHECKPOINT_NAME)
    stopped_at = checkpoint["step"]
    assert 0 < stopped_at < steps, f"the run finished before it could be stopped:\n{stderr[-3000:]}"
    assert checkpoint["world_size"] == 2 and len(checkpoint["rng"]) == 2
    assert not (run_dir / "backbone").exists()
    # only rank 0 prints the stop message, naming the step saved and the torchrun resume command
    assert stderr.count("interrupted: stopped by SIGTERM") == 1, stderr[-3000:]
    assert f"holds step {stopped_at} of {steps}" in stderr
    assert f"torchrun --nproc_per_node 2 -m plstitch_eval train --resume {run_dir}" in stderr
    log = [json.loads(line) for line in (run_dir / LOG_NAME).read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, stopped_at + 1))

    with caplog.at_level("WARNING"):
        resumed = train(resume=run_dir)  # one process now: micro-batch 4 instead of 2 x 2
    assert "written by 2 processes, resuming with 1" in caplog.text
    assert resumed.history[-1]["step"] == steps
    expected = load_training_checkpoint(reference.out_dir / CHECKPOINT_NAME)
    got = load_training_checkpoint(run_dir / CHECKPOINT_NAME)
    assert got["step"] == steps and got["world_size"] == 1
    assert got["sampler"] == expected["sampler"]
    assert_states_close(expected["model"], got["model"])
    log = [json.loads(line) for line in (run_dir / LOG_NAME).read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, steps + 1))
    reference_log = [json.loads(line) for line in (reference.out_dir / LOG_NAME).read_text().splitlines()]
    assert [r["loss"] for r in log] == pytest.approx([r["loss"] for r in reference_log], rel=1e-3)
    assert (run_dir / "backbone" / "model.safetensors").is_file()
