"""The cells of a `--executor slurm` run and how each stands: the jobs record `OUT/slurm/jobs.json` (every
cell's paths, settings and latest job id, written by the submitting command only) and each cell's status,
from its results file first, then from its job (`cluster.states`): done, queued, running, failed or missing
(never submitted, or its results gone since)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.cells import NA, SLURM_DIR, Cell, results_state
from plstitch_eval.cluster import ENDED, QUEUED, RUNNING, job_outcome, job_phase, job_states
from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.io import write_json_atomic

__all__ = [
    "DONE",
    "FAILED",
    "JOBS_FILE",
    "MISSING",
    "CellRecord",
    "CellStatus",
    "cell_statuses",
    "read_records",
    "record_of",
    "submitit_folder",
    "write_records",
]

JOBS_SCHEMA = "plstitch.benchmark-slurm/v1"
JOBS_FILE, LOGS_DIR, SUBMITIT_DIR = "jobs.json", "logs", "submitit"
DONE, FAILED, MISSING = "done", "failed", "missing"  # and the job phases QUEUED, RUNNING
FAILED_PREFIX = "CellFailedError: "  # how a failed cell's error ends its job's traceback


@dataclass
class CellRecord:
    """One cell in the jobs record: its paths relative to OUT, its settings (what `done` is checked
    against), its latest job and the earlier ones (a rerun's resubmission), and its log link."""

    key: str
    name: str
    results: str
    features: str
    settings: dict[str, Any]
    job_id: str | None = None
    earlier_jobs: list[str] = field(default_factory=list)
    log: str | None = None


@dataclass
class CellStatus:
    """How a cell stands: `status` (done, queued, running, failed, missing), its job and Slurm state, why it
    failed, and its log."""

    key: str
    name: str
    status: str
    job_id: str | None = None
    slurm_state: str = ""
    error: str | None = None
    log: str | None = None


def submitit_folder(out: Path) -> Path:
    """Where submitit keeps the jobs' pickles, scripts and logs (by job id): `OUT/slurm/submitit/`."""
    return out / SLURM_DIR / SUBMITIT_DIR


def logs_folder(out: Path) -> Path:
    """Where each cell's log is linked by the cell's name: `OUT/slurm/logs/<model>__<dataset>__<...>.out`."""
    return out / SLURM_DIR / LOGS_DIR


def record_of(cell: Cell, key: str, settings: dict[str, Any], earlier: CellRecord | None) -> CellRecord:
    """The record of `cell` as planned now, keeping `earlier`'s jobs (the same cell, recorded before)."""
    record = CellRecord(
        key=key,
        name=cell.name,
        results=cell.results_path.relative_to(cell.out).as_posix(),
        features=cell.store.relative_to(cell.out).as_posix(),
        settings=settings,
    )
    if earlier is not None:
        record.job_id, record.earlier_jobs, record.log = earlier.job_id, earlier.earlier_jobs, earlier.log
    return record


def read_records(out: Path) -> dict[str, CellRecord]:
    """The jobs record of `out`, by cell key ({} where there is none yet)."""
    path = out / SLURM_DIR / JOBS_FILE
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {key: CellRecord(**record) for key, record in data["cells"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}); remove it and rerun to submit anew.") from None


def write_records(out: Path, records: dict[str, CellRecord]) -> None:
    """Write the jobs record atomically (`OUT/slurm/jobs.json`)."""
    data = {"schema": JOBS_SCHEMA, "cells": {key: asdict(record) for key, record in records.items()}}
    write_json_atomic(out / SLURM_DIR / JOBS_FILE, data)


def cell_statuses(out: Path, records: dict[str, CellRecord]) -> dict[str, CellStatus]:
    """Each recorded cell's status: done when its results file is done (whatever its job says); else its
    job's phase; a job that ended without a done results file is failed, with the reason its result file
    or Slurm gives (cancelled, out of time, killed)."""
    statuses = {key: _results_status(out, record) for key, record in records.items()}
    asked = [r.job_id for key, r in records.items() if r.job_id and statuses[key] is None]
    states = job_states(asked) if asked else {}
    for key, record in records.items():
        if statuses[key] is None:
            statuses[key] = _job_status(out, record, states.get(record.job_id or "", ""))
    return statuses  # type: ignore[return-value]


def _results_status(out: Path, record: CellRecord) -> CellStatus | None:
    """done (the results file is done), missing (no job yet), or None: its job decides."""
    state, _ = results_state(out / record.results, out / record.features, record.settings)
    if state == "done":
        return CellStatus(record.key, record.name, DONE, record.job_id, log=record.log)
    if record.job_id is None:
        return CellStatus(record.key, record.name, MISSING, error="not submitted yet")
    return None


def _job_status(out: Path, record: CellRecord, state: str) -> CellStatus:
    """A submitted cell without a done results file, by its job's Slurm `state` and result file."""
    status = CellStatus(record.key, record.name, FAILED, record.job_id, state, log=record.log)
    phase = job_phase(state)
    if phase in (QUEUED, RUNNING):
        status.status = phase
        return status
    outcome = job_outcome(submitit_folder(out), record.job_id or "")
    if outcome is not None and outcome[0] == NA:  # its dataset has no labels of its task: not a failure
        status.status, status.error = NA, outcome[1]
    elif outcome is not None and outcome[0] == "error":
        status.error = outcome[1].split(FAILED_PREFIX, 1)[-1]
    elif outcome is not None:
        status.error = "its job finished but left no done results file (see its log)"
    elif phase == ENDED:
        status.error = f"its job ended {state.split()[0]}, without a result (see its log)"
    else:
        status.error = "its job is gone from Slurm without a result (cancelled, killed or out of time)"
    return status
