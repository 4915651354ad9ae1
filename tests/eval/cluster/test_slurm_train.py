"""`plstitch train --executor slurm` through a real one-node Slurm started on this machine
(`tests/eval/benchmark/slurm_cluster.py`; skipped, saying why, where it cannot start or without submitit).

One job of 2 CPU tasks (`--gpus-per-node 0 --tasks-per-node 2`, gloo) whose process group comes from Slurm's
environment trains the tiny preset for a few steps to the weights of one local process at the same global
batch (as `torchrun` does, tests/train/test_ddp.py); a rerun of the finished run submits nothing; a job
requeued with `scontrol requeue` after its first checkpoint resumes from the run's last checkpoint to the
weights of an uninterrupted run, and a rerun with `--wait` waits for it, submitting nothing."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME
from plstitch_train.trainer import load_training_checkpoint, train
from tests.eval.benchmark.slurm_cluster import SlurmCluster, module_slurm
from tests.train.conftest import assert_states_close, frame_cache, tiny_config, video_dir  # noqa: F401

runner = CliRunner()
STEPS = 2
JOB_ENV = {"OMP_NUM_THREADS": "1", "PLSTITCH_NO_LIVE": "1"}  # the jobs inherit this environment
REQUEUE_STEPS = 6


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    """A one-node Slurm for this module (`SLURM_CONF` set), stopped after."""
    with module_slurm(tmp_path_factory.mktemp("slurm"), JOB_ENV) as cluster:
        yield cluster


@pytest.mark.slow
def test_a_two_process_run_as_one_slurm_job_trains_the_weights_of_one_process(
    slurm: SlurmCluster,
    video_dir: Path,  # noqa: F811
    frame_cache: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=STEPS, batch_size=4)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()), encoding="utf-8")
    single = train(config, tmp_path / "single")
    run = tmp_path / "run"
    args = [
        "train", "--config", str(config_file), "--out", str(run),
        "--executor", "slurm", "--gpus-per-node", "0", "--tasks-per-node", "2", "--slurm-time", "10",
    ]  # fmt: skip
    submitted = runner.invoke(app, args)
    assert submitted.exit_code == 0, submitted.output
    assert "submitted the run as job" in submitted.stderr and "1 node(s) x 2 task(s)" in submitted.stderr
    record = json.loads((tmp_path / "run.slurm" / "jobs.json").read_text(encoding="utf-8"))
    state = slurm.wait_for(record["job_id"], {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=400)
    log = tmp_path / "run.slurm" / "logs" / "train"
    errors = log.with_suffix(".err").read_text(encoding="utf-8", errors="replace")
    assert state == "COMPLETED", errors[-3000:]

    got = load_training_checkpoint(run / CHECKPOINT_NAME)
    expected = load_training_checkpoint(single.out_dir / CHECKPOINT_NAME)
    assert got["world_size"] == 2 and len(got["rng"]) == 2 and got["step"] == STEPS
    assert_states_close(expected["model"], got["model"])
    assert (run / "backbone" / "model.safetensors").is_file()
    lines = log.with_suffix(".out").read_text(encoding="utf-8").splitlines()
    summaries = [json.loads(line) for line in lines if line.startswith('{"out_dir"')]
    assert [summary["step"] for summary in summaries] == [STEPS]  # rank 0's summary, in the job's log

    rerun = runner.invoke(app, args)
    assert rerun.exit_code == 0, rerun.output
    assert "already finished: nothing submitted" in rerun.stderr


@pytest.mark.slow
def test_a_requeued_training_job_resumes_to_the_weights_of_an_uninterrupted_run(
    slurm: SlurmCluster,
    video_dir: Path,  # noqa: F811
    frame_cache: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=REQUEUE_STEPS, batch_size=4, checkpoint_every=1)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()), encoding="utf-8")
    single = train(config, tmp_path / "single")
    run = tmp_path / "run"
    args = [
        "train", "--config", str(config_file), "--out", str(run),
        "--executor", "slurm", "--gpus-per-node", "0", "--tasks-per-node", "2", "--slurm-time", "10",
    ]  # fmt: skip
    submitted = runner.invoke(app, args)
    assert submitted.exit_code == 0, submitted.output
    job_id = json.loads((tmp_path / "run.slurm" / "jobs.json").read_text(encoding="utf-8"))["job_id"]
    deadline = time.monotonic() + 300  # requeue once the run has its first checkpoint
    while not (run / CHECKPOINT_NAME).exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert (run / CHECKPOINT_NAME).exists(), "no checkpoint in 300 s"
    first = load_training_checkpoint(run / CHECKPOINT_NAME)["step"]
    slurm.run("scontrol", "requeue", job_id)
    config_toml = tmp_path / "slurm.toml"  # --wait asks Slurm every 0.5 s
    config_toml.write_text("[slurm]\npoll_seconds = 0.5\n", encoding="utf-8")
    waited = runner.invoke(app, [*args, "--slurm-config", str(config_toml), "--wait"])
    assert waited.exit_code == 0, waited.output
    assert "still out; nothing submitted" in waited.stderr
    assert f"job {job_id} finished the run" in waited.stderr
    state = slurm.wait_for(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=60)
    log = tmp_path / "run.slurm" / "logs" / "train"
    assert state == "COMPLETED", log.with_suffix(".err").read_text(encoding="utf-8", errors="replace")[-3000:]
    assert log.with_suffix(".out").read_text(encoding="utf-8").count("Starting with") == 2  # ran again
    assert first < REQUEUE_STEPS  # it was requeued before the end, and resumed from a checkpoint
    got = load_training_checkpoint(run / CHECKPOINT_NAME)
    assert got["step"] == REQUEUE_STEPS and got["world_size"] == 2
    assert_states_close(load_training_checkpoint(single.out_dir / CHECKPOINT_NAME)["model"], got["model"])


def test_slurm_shape_flags_without_slurm_and_overwrite_on_slurm_are_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run"
    for extra, says in (
        (["--nodes", "2"], "--nodes, --gpus-per-node and --tasks-per-node shape a Slurm job"),
        (["--executor", "slurm", "--overwrite"], "--overwrite with --executor slurm"),
    ):
        result = runner.invoke(app, ["train", "--preset", "tiny-cpu", "--out", str(out), *extra])
        assert result.exit_code == 1, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and says in lines[0] and "Traceback" not in result.output
        assert not out.exists() and not (tmp_path / "run.slurm").exists()
