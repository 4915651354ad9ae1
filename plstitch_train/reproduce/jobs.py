"""Running a reproduction's training jobs: several one-thread runs side by side in spawned processes, and the
training time a run folder's log records (summed over resumed segments)."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from plstitch_eval.hub.run_folder import LOG_NAME
from plstitch_eval.utils.console import logger
from plstitch_train.reproduce.presets import ReproduceConfig, ReproduceLayout
from plstitch_train.run.signals import TrainingInterrupted

__all__ = ["run_in_parallel", "training_seconds"]


def run_in_parallel(
    config: ReproduceConfig,
    jobs: Sequence[tuple[str, int, bool]],
    finish: Callable[[str, int, bool], None],
    worker: Callable[..., int | None],
) -> None:
    """Train `config.n_jobs` runs at once in spawned processes; `finish` each in this process as it completes.

    `worker(config, row, seed, reverse, threads, log_level)` (a module-level function, so it pickles) trains,
    evaluates and measures one run and returns the stop signal or None.

    Why: the tiny CPU model does not use a second thread well, so two one-thread runs side by side train 1.65x
    faster than one two-thread run (BENCHMARKS.md). Runs are independent and each resumes on its own; on
    SIGINT/SIGTERM every worker checkpoints its run and `TrainingInterrupted` is raised here.
    """

    threads = max(1, (os.cpu_count() or 1) // config.n_jobs)
    logger.info("training %d runs at once, %d torch thread(s) each", config.n_jobs, threads)
    pool = ProcessPoolExecutor(config.n_jobs, mp_context=multiprocessing.get_context("spawn"))
    level = logger.getEffectiveLevel()
    pending = {pool.submit(worker, config, *job, threads, level): job for job in jobs}
    stopped: int | None = None
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                job = pending.pop(future)
                signum = future.result()
                if signum is not None:
                    stopped = signum
                    continue
                if stopped is None:
                    finish(*job)
            if stopped is not None:
                break
    except KeyboardInterrupt:
        stopped = int(signal.SIGINT)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # running workers finish or checkpoint their run
    if stopped is not None:
        stop = TrainingInterrupted(stopped)
        stop.run_dir = ReproduceLayout.of(config).runs
        raise stop


def training_seconds(run_dir: Path) -> float | None:
    """Wall-clock seconds the trainer spent on this run, summed over resumed segments (from `log.jsonl`)."""
    log = run_dir / LOG_NAME
    if not log.is_file():
        return None
    total, previous = 0.0, 0.0
    for line in log.read_text(encoding="utf-8").splitlines():
        elapsed = float(json.loads(line).get("time", 0.0)) if line.strip() else previous
        if elapsed < previous:  # the clock restarts when a run is resumed
            total += previous
        previous = elapsed
    return total + previous
