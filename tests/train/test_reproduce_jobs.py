"""Reproduction jobs: several runs side by side in spawned processes, each finished in the parent as it
completes; a worker's stop signal stops the rest and is raised as TrainingInterrupted."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from plstitch_train.reproduce.jobs import run_in_parallel
from plstitch_train.reproduce.presets import ReproduceConfig, get_reproduce_preset
from plstitch_train.run.signals import TrainingInterrupted


def record_job(config: ReproduceConfig, row: str, seed: int, reverse: bool, threads: int, level: int):
    """A worker that leaves its pid and thread count in OUT/row-seed, or stops on row "stop"."""
    if row == "stop":
        return int(signal.SIGTERM)
    (config.out / f"{row}-{seed}-{int(reverse)}").write_text(f"{os.getpid()} {threads}")
    return None


def test_jobs_run_in_their_own_processes_and_each_is_finished(tmp_path: Path) -> None:
    config = ReproduceConfig(preset=get_reproduce_preset("synthetic-smoke"), out=tmp_path, jobs=2)
    finished = []
    jobs = [("pl", 0, False), ("pl", 1, False), ("mim", 0, True)]
    run_in_parallel(config, jobs, lambda *job: finished.append(job), record_job)
    assert sorted(finished) == sorted(jobs)
    written = {p.name: p.read_text().split() for p in tmp_path.iterdir()}
    assert set(written) == {"pl-0-0", "pl-1-0", "mim-0-1"}
    assert all(pid != str(os.getpid()) for pid, _ in written.values())  # not in this process
    assert {threads for _, threads in written.values()} == {str(max(1, (os.cpu_count() or 1) // 2))}


def test_a_stopped_worker_raises_training_interrupted(tmp_path: Path) -> None:
    config = ReproduceConfig(preset=get_reproduce_preset("synthetic-smoke"), out=tmp_path, jobs=1)
    finished = []
    with pytest.raises(TrainingInterrupted):
        run_in_parallel(config, [("stop", 0, False)], lambda *job: finished.append(job), record_job)
    assert finished == []
