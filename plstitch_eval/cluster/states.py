"""How a Slurm job stands: queued, running or ended (and how it ended), asked of `squeue` (which knows every
job the controller still holds, finished ones for a few minutes) and then of `sacct` (which knows the
finished ones where the cluster keeps accounting, parsed by submitit); and what the job's own result file,
submitit's `<id>_0_result.pkl`, says of its end."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from plstitch_eval.cluster.submit import import_submitit
from plstitch_eval.errors import ConfigError

__all__ = [
    "ENDED",
    "QUEUED",
    "RUNNING",
    "UNKNOWN",
    "job_outcome",
    "job_phase",
    "job_states",
]

QUEUED, RUNNING, ENDED, UNKNOWN = "queued", "running", "ended", "unknown"
QUEUED_STATES = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING_STATES = {"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT"}
RESIZING = {"RESIZING", "PREEMPTED"}  # between two lives of a job: Slurm requeues or ends it next
QUERY_TIMEOUT_S = 60


def job_phase(state: str) -> str:
    """queued, running, ended or unknown, from a Slurm state (`CANCELLED by 0` counts as `CANCELLED`)."""
    word = state.split()[0].upper() if state.strip() else ""
    if not word or word == "UNKNOWN":
        return UNKNOWN
    if word in QUEUED_STATES:
        return QUEUED
    if word in RUNNING_STATES or word in RESIZING:
        return RUNNING
    return ENDED


def job_states(job_ids: Iterable[str]) -> dict[str, str]:
    """Each job's Slurm state (`PENDING`, `RUNNING`, `COMPLETED`, `CANCELLED`, ...), "" where neither
    squeue nor sacct knows it (gone from the controller, and no accounting to remember it)."""
    wanted = sorted({str(job_id) for job_id in job_ids})
    states = _squeue(wanted) if wanted else {}
    missing = [job_id for job_id in wanted if job_id not in states]
    if missing:
        states.update(_sacct(missing))
    return {job_id: states.get(job_id, "") for job_id in wanted}


def _squeue(job_ids: list[str]) -> dict[str, str]:
    """`squeue --states=all` of the jobs' arrays, array tasks one a line (`-r`): id -> state. A controller
    that does not answer is one line (a job it holds must never be taken for gone, and submitted again)."""
    arrays = sorted({job_id.split("_")[0] for job_id in job_ids})
    command = ["squeue", "-h", "-r", "--states=all", "-o", "%i|%T", "-j", ",".join(arrays)]
    done = _run(command)
    if done is None or (done.returncode != 0 and "Invalid job id" not in done.stderr):
        why = (done.stderr.strip().splitlines() or ["no answer"])[-1] if done is not None else "not run"
        raise ConfigError(f"Slurm does not answer `squeue` ({why}); try again when it does.")
    states: dict[str, str] = {}
    for line in done.stdout.splitlines() if done.returncode == 0 else []:
        job_id, _, state = line.strip().partition("|")
        if job_id and state:
            states[job_id] = state.strip()
    return states


def _sacct(job_ids: list[str]) -> dict[str, str]:
    """`sacct` of the jobs, read by submitit's parser ({} where the cluster keeps no accounting)."""
    submitit = import_submitit()
    arrays = sorted({job_id.split("_")[0] for job_id in job_ids})
    command = ["sacct", "-o", "JobID,State", "--parsable2", *[arg for a in arrays for arg in ("-j", a)]]
    done = _run(command)
    if done is None or done.returncode != 0 or not done.stdout.strip():
        return {}
    info = submitit.slurm.slurm.SlurmInfoWatcher().read_info(done.stdout)
    return {job_id: info[job_id].get("State", "") for job_id in job_ids if job_id in info}


def _run(command: list[str]) -> subprocess.CompletedProcess[str] | None:
    """A Slurm query, run (None when it cannot be: not installed, or no answer in time)."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def job_outcome(folder: Path, job_id: str) -> tuple[str, str] | None:
    """What the job's result file says: ("success", "") or ("error", its exception's last line); a job
    that returned a dict with a ``status`` other than done (a benchmark cell found n/a): (that status, its
    ``reason``). None while it has none (queued, running, or ended without one: cancelled, killed, out of
    time)."""
    submitit = import_submitit()
    path = submitit.core.utils.JobPaths(folder, job_id=job_id, task_id=0).result_pickle
    if not path.exists():
        return None
    try:
        kind, value = submitit.core.utils.pickle_load(path)
    except Exception as exc:  # a result file cut short or from another submitit: say so, do not fail
        return "error", f"its result file {path.name} cannot be read ({type(exc).__name__})"
    if kind == "success":
        said = value if isinstance(value, dict) else {}
        status = said.get("status")
        if isinstance(status, str) and status not in ("done", "success"):
            return status, str(said.get("reason") or "")
        return "success", ""
    lines = [line.strip() for line in str(value).splitlines() if line.strip()]
    return "error", lines[-1] if lines else "the job raised an error (see its log)"
