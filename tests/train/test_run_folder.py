"""Run folder: a rerun resumes, keeps a finished run, refuses other settings; --overwrite; SIGINT/SIGTERM."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, LOG_NAME, TRAIN_CONFIG_NAME
from plstitch_train.presets import TrainConfig
from plstitch_train.trainer import (
    StopSignals,
    TrainingInterrupted,
    config_differences,
    load_training_checkpoint,
    plan_run,
    train,
)
from tests.train.conftest import tiny_config

STEPS = 4
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def reference(video_dir: Path, frame_cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """An uninterrupted 4-step run (the weights an interrupted-and-resumed run must reach)."""
    config = tiny_config(video_dir, frame_cache, max_steps=STEPS)
    return config, train(config, tmp_path_factory.mktemp("reference"))


def _config_file(config: TrainConfig, folder: Path) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps(config.to_dict()))
    return path


def _cli(*args: str):
    from plstitch_eval.cli import app

    return CliRunner().invoke(app, ["train", *args])


def _logged_steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run_dir / LOG_NAME).read_text().splitlines()]


def _snapshot(run_dir: Path) -> dict[str, tuple[int, bytes]]:
    """(mtime_ns, bytes) of every file in the run folder."""
    return {
        str(p.relative_to(run_dir)): (p.stat().st_mtime_ns, p.read_bytes())
        for p in run_dir.rglob("*")
        if p.is_file()
    }


def _assert_same_weights(expected_dir: Path, got_dir: Path) -> None:
    expected = load_training_checkpoint(expected_dir / CHECKPOINT_NAME)["model"]
    got = load_training_checkpoint(got_dir / CHECKPOINT_NAME)["model"]
    assert expected.keys() == got.keys()
    for key, value in expected.items():
        assert torch.equal(value, got[key]), key


def test_rerunning_an_interrupted_run_resumes_it(reference, tmp_path: Path) -> None:
    config, full = reference
    run_dir = tmp_path / "run"
    train(config, run_dir, stop_after=1)  # "killed" after its checkpoint at step 1
    result = _cli("--config", str(_config_file(config, tmp_path)), "--out", str(run_dir))
    assert result.exit_code == 0, result.output
    assert _logged_steps(run_dir) == list(range(1, STEPS + 1))  # continued, not restarted from step 0
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["step"] == STEPS and not summary["already_finished"]
    _assert_same_weights(full.out_dir, run_dir)


def test_rerunning_a_finished_run_rewrites_nothing(reference, tmp_path: Path) -> None:
    config, _ = reference
    run_dir = tmp_path / "run"
    args = ["--config", str(_config_file(config, tmp_path)), "--out", str(run_dir)]
    assert _cli(*args).exit_code == 0
    before = _snapshot(run_dir)
    time.sleep(0.01)  # a rewrite would show in mtime_ns
    again = _cli(*args, "--num-workers", "0")  # a runtime setting may differ
    assert again.exit_code == 0, again.output
    assert "already finished" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert summary["already_finished"] and summary["step"] == STEPS and "loss" in summary["final"]
    assert _snapshot(run_dir) == before
    resumed = _cli("--resume", str(run_dir))  # --resume of a finished run is a no-op as well
    assert resumed.exit_code == 0 and "already finished" in resumed.stderr
    assert _snapshot(run_dir) == before


def test_other_settings_are_refused_in_one_line(reference, tmp_path: Path) -> None:
    config, _ = reference
    run_dir = tmp_path / "run"
    train(config, run_dir, stop_after=1)
    before = _snapshot(run_dir)
    args = ["--config", str(_config_file(config, tmp_path)), "--out", str(run_dir)]
    result = _cli(*args, "--lr", "0.5", "--seed", "7")
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output
    line = lines[0]
    assert str(run_dir) in line and "--resume" in line and "--overwrite" in line
    assert f"base_lr {config.base_lr} -> 0.5" in line and "seed 0 -> 7" in line
    assert _snapshot(run_dir) == before


def test_overwrite_starts_again_and_refuses_a_folder_with_foreign_files(reference, tmp_path: Path) -> None:
    config, _ = reference
    run_dir = tmp_path / "run"
    train(config, run_dir)
    (run_dir / "notes.txt").write_text("mine")
    args = ["--config", str(_config_file(config, tmp_path)), "--out", str(run_dir), "--overwrite"]
    invalid = _cli(*args, "--clip-len", "1")  # refused before anything of the old run is touched
    assert invalid.exit_code == 1 and "clip_len" in invalid.output
    assert (run_dir / "backbone" / "model.safetensors").is_file()
    before = _snapshot(run_dir)
    foreign = _cli(*args, "--seed", "3", "--steps", "2")  # issue 59: named, and nothing is deleted
    assert foreign.exit_code == 1 and "holds notes.txt, which plstitch did not write" in foreign.output
    assert _snapshot(run_dir) == before and (run_dir / "notes.txt").read_text() == "mine"
    (run_dir / "notes.txt").unlink()
    result = _cli(*args, "--seed", "3", "--steps", "2")
    assert result.exit_code == 0, result.output
    assert _logged_steps(run_dir) == [1, 2]
    assert json.loads((run_dir / TRAIN_CONFIG_NAME).read_text())["run"]["seed"] == 3
    assert load_training_checkpoint(run_dir)["step"] == 2
    both = _cli("--resume", str(run_dir), "--overwrite")
    assert both.exit_code == 1 and "one of them" in both.output


def test_config_differences_ignore_runtime_settings_and_relative_paths(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    old = TrainConfig(data="videos")
    new = TrainConfig(data=str(tmp_path / "videos"), device="cuda", num_workers=9, cache_dir="/x")
    assert config_differences(old.to_dict(), new.to_dict()) == {}
    assert config_differences(old.to_dict(), new.replace(epochs=3).to_dict()) == {"epochs": (old.epochs, 3)}


def test_a_flat_saved_config_and_its_sections_are_the_same_run(monkeypatch, tmp_path: Path) -> None:
    """A run folder written before the sections existed holds the flat form: same settings, same run."""
    monkeypatch.chdir(tmp_path)
    config = TrainConfig(data="videos", epochs=2)
    assert config_differences(config.to_flat_dict(), config.to_dict()) == {}
    assert config_differences(config.to_dict(), config.to_flat_dict()) == {}
    flat_old = {**config.to_flat_dict(), "num_workers": 9}  # a runtime setting; the path made absolute
    assert config_differences(flat_old, config.replace(data=str(tmp_path / "videos")).to_dict()) == {}
    other = config.replace(base_lr=1e-3, model_args={"embed_dim": 48})
    assert config_differences(config.to_flat_dict(), other.to_dict()) == {
        "model_args.embed_dim": ("<unset>", 48),
        "base_lr": (config.base_lr, 1e-3),
    }


def test_a_run_folder_saved_in_the_flat_form_resumes(reference, tmp_path: Path) -> None:
    """Its train_config.json and last.ckpt hold the flat form (as before the sections): a rerun resumes it."""
    config, full = reference
    run_dir = tmp_path / "run"
    train(config, run_dir, stop_after=1)
    (run_dir / TRAIN_CONFIG_NAME).write_text(json.dumps(config.to_flat_dict()))
    assert load_training_checkpoint(run_dir)["config"] == config.to_flat_dict()
    assert plan_run(config, run_dir) == "resume"
    result = _cli("--config", str(_config_file(config, tmp_path)), "--out", str(run_dir))
    assert result.exit_code == 0, result.output
    assert _logged_steps(run_dir) == list(range(1, STEPS + 1))
    _assert_same_weights(full.out_dir, run_dir)
    assert json.loads((run_dir / TRAIN_CONFIG_NAME).read_text()) == config.to_dict()  # now nested


def test_stop_signals_first_waits_for_the_step_second_stops_at_once() -> None:
    stops = StopSignals()
    with pytest.raises(TrainingInterrupted):  # before the loop: nothing to save, stop at once
        stops.handle(signal.SIGTERM)
    stops = StopSignals()
    stops.graceful = True
    stops.handle(signal.SIGINT)
    assert stops.requested == signal.SIGINT
    with pytest.raises(TrainingInterrupted) as raised:
        stops.handle(signal.SIGINT)
    assert raised.value.exit_code == 130
    duplicated = StopSignals(duplicate_s=60.0)
    duplicated.graceful = True
    duplicated.handle(signal.SIGINT)
    duplicated.handle(signal.SIGINT)  # the same Ctrl-C forwarded by torchrun: ignored
    assert duplicated.requested == signal.SIGINT


def test_sigint_in_process_checkpoints_at_the_step_and_restores_handlers(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=200, epochs=100)
    run_dir = tmp_path / "run"

    def interrupt_after_first_step() -> None:
        deadline = time.monotonic() + 120
        while not (run_dir / LOG_NAME).is_file():
            if time.monotonic() > deadline:
                return
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.getsignal(signal.SIGINT)
    threading.Thread(target=interrupt_after_first_step, daemon=True).start()
    with pytest.raises(TrainingInterrupted) as raised:
        train(config, run_dir)
    stop = raised.value
    assert stop.exit_code == 130 and signal.getsignal(signal.SIGINT) is previous
    assert 0 < stop.saved_step < 200 and stop.saved_step == load_training_checkpoint(run_dir)["step"]
    assert _logged_steps(run_dir)[-1] == stop.saved_step
    assert f"plstitch train --resume {run_dir}" in stop.message()


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", PLSTITCH_NO_LIVE="1")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


def _plstitch() -> list[str]:
    """The installed `plstitch` script next to this Python, else the module."""
    script = Path(sys.executable).parent / "plstitch"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "plstitch_eval"]


@pytest.mark.timeout(300)
def test_sigterm_prints_the_resume_command_which_resumes(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    steps = 30
    config = tiny_config(video_dir, frame_cache, max_steps=steps, epochs=15)
    run_dir, reference_dir = tmp_path / "run", tmp_path / "reference"
    command = [*_plstitch(), "train", "--config", str(_config_file(config, tmp_path)), "--out", str(run_dir)]
    # the uninterrupted reference runs in a subprocess too: bit-equal weights need the same thread settings,
    # which earlier tests in this pytest process may have changed (faiss sets the OpenMP thread count)
    uninterrupted = subprocess.run(
        [*command[:-1], str(reference_dir)], env=_env(), cwd=REPO, capture_output=True, text=True, timeout=200
    )
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-3000:]
    process = subprocess.Popen(
        command, env=_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 200
    log = run_dir / LOG_NAME
    while (
        (not log.is_file() or not log.read_text()) and process.poll() is None and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr[-3000:]
    saved = load_training_checkpoint(run_dir)["step"]
    assert 0 < saved < steps and _logged_steps(run_dir)[-1] == saved
    assert "Traceback" not in stderr and f"holds step {saved} of {steps}" in stderr
    printed = next(line for line in stderr.splitlines() if "resume with:" in line)
    resume = shlex.split(printed.split("resume with:", 1)[1].split("  (")[0])
    assert resume == ["plstitch", "train", "--resume", str(run_dir)]
    done = subprocess.run(
        [*_plstitch(), *resume[1:]], env=_env(), cwd=REPO, capture_output=True, text=True, timeout=200
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert _logged_steps(run_dir) == list(range(1, steps + 1))
    _assert_same_weights(reference_dir, run_dir)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sigterm_under_torchrun_stops_every_rank_at_one_step(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=200, epochs=100)
    run_dir = tmp_path / "run"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    command += [
        "-m",
        "plstitch_eval",
        "train",
        "--config",
        str(_config_file(config, tmp_path)),
        "--out",
        str(run_dir),
    ]
    process = subprocess.Popen(
        command, env=_env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 200
    log = run_dir / LOG_NAME
    while (
        (not log.is_file() or not log.read_text()) and process.poll() is None and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    process.send_signal(signal.SIGTERM)  # the agent forwards it to both ranks
    _, stderr = process.communicate(timeout=120)
    assert process.returncode != 0
    checkpoint = load_training_checkpoint(run_dir)
    assert checkpoint["world_size"] == 2 and len(checkpoint["rng"]) == 2  # both ranks took part in the save
    assert 0 < checkpoint["step"] < 200 and _logged_steps(run_dir)[-1] == checkpoint["step"]
    assert stderr.count("resume with:") == 1  # only rank 0 prints
    assert f"torchrun --nproc_per_node 2 -m plstitch_eval train --resume {run_dir}" in stderr
