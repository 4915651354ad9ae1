"""`plstitch train --executor slurm --nodes N --gpus-per-node G`: pretraining as one Slurm job of N x G tasks
(one process per GPU, as `torchrun` gives; on CPU `--gpus-per-node 0 --tasks-per-node T`, gloo). Each task
sets torch.distributed's variables from Slurm's environment (submitit's `TorchDistributedEnvironment`: RANK,
WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR from the node list, MASTER_PORT from the job id) and
runs the same `train_session` a torchrun rank runs, so the run folder is the one `torchrun` writes.

Requeue: a requeued job (`scontrol requeue`, preemption; SIGTERM makes the trainer checkpoint at the next
step) runs the same request again, which resumes the run in `--out` from its last checkpoint; on a timeout
signal `TrainJob.checkpoint` hands submitit the same call, which requeues the job. The job's record is
`OUT.slurm/jobs.json` beside the run folder (which holds only what a run writes)."""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from plstitch_eval.cluster import (
    QUEUED,
    RUNNING,
    SlurmSettings,
    import_submitit,
    job_outcome,
    job_phase,
    job_states,
    link_logs,
    slurm_executor,
    submit_array,
)
from plstitch_eval.errors import ConfigError, TrainingError
from plstitch_eval.utils.console import console, print_error
from plstitch_eval.utils.io import write_json_atomic
from plstitch_train.launch import TrainRequest, train_session

__all__ = ["JOB_NAME", "TrainJob", "TrainJobError", "slurm_folder", "train_on_slurm", "train_where"]

JOB_NAME = "plstitch-train"
JOBS_SCHEMA = "plstitch.train-slurm/v1"


class TrainJobError(TrainingError):
    """A training task ended with a non-zero exit code (stopped, collapsed, failed)."""


def slurm_folder(out: Path) -> Path:
    """The Slurm files of a run: `OUT.slurm/` beside its run folder `OUT`."""
    out = Path(out).expanduser().absolute()
    return out.parent / f"{out.name}.slurm"


class TrainJob:
    """One task of the training job: torch.distributed's variables from Slurm's, then `train_session`."""

    def __init__(self, request: TrainRequest) -> None:
        self.request = request

    def __call__(self) -> int:
        from submitit.helpers import TorchDistributedEnvironment

        TorchDistributedEnvironment().export(set_cuda_visible_devices=False, overwrite=True)
        code = train_session(self.request)
        if code:
            raise TrainJobError(f"training task {os.environ.get('RANK')} ended with exit code {code}")
        return code

    def checkpoint(self) -> Any:
        """submitit calls this on a timeout signal: requeue the same request (it resumes the run folder
        from its last checkpoint)."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self)


def train_where(
    request: TrainRequest,
    slurm: SlurmSettings | None,
    nodes: int = 1,
    gpus_per_node: int = 0,
    tasks_per_node: int | None = None,
) -> int:
    """Train here (`slurm` None: `train_session`, as always) or as one Slurm job; the exit code. Slurm's
    shape flags without `--executor slurm` are one line."""
    if slurm is None:
        if nodes != 1 or gpus_per_node or tasks_per_node is not None:
            raise ConfigError(
                "--nodes, --gpus-per-node and --tasks-per-node shape a Slurm job: they need --executor "
                "slurm (on one machine, torchrun --nproc_per_node)."
            )
        return train_session(request)
    return train_on_slurm(request, slurm, nodes, gpus_per_node, tasks_per_node)


def train_on_slurm(
    request: TrainRequest,
    settings: SlurmSettings,
    nodes: int = 1,
    gpus_per_node: int = 0,
    tasks_per_node: int | None = None,
) -> int:
    """Submit the run as one job of `nodes` x `tasks_per_node` tasks (default: one per GPU, else 1), unless
    its recorded job is still queued or running; with `settings.wait` wait for it. The exit code: 0, 1
    when the waited-for job did not complete."""
    import_submitit()
    if request.overwrite:
        raise ConfigError(
            "--overwrite with --executor slurm: a requeued job would replace the run again; delete the run "
            "folder first (or run once with --executor local --overwrite)."
        )
    if request.out is None:
        raise ConfigError("--executor slurm needs --out (the run folder; with --resume, the run's own).")
    tasks = tasks_per_node if tasks_per_node is not None else max(gpus_per_node, 1)
    if nodes < 1 or tasks < 1 or gpus_per_node < 0:
        raise ConfigError("--nodes and --tasks-per-node must be at least 1, --gpus-per-node at least 0.")
    if request.launch().action == "finished":  # the run's settings and folder checked before a job
        _say(f"{request.out} already finished: nothing submitted.")
        return 0
    folder = slurm_folder(request.out)
    record = _read(folder)
    job_id = record.get("job_id")
    if job_id and job_phase(job_states([job_id]).get(job_id, "")) in (QUEUED, RUNNING):
        _say(f"slurm: job {job_id} of this run is still out; nothing submitted.")
    else:
        job_id = _submit(request, settings, folder, nodes, gpus_per_node, tasks, record)
    while settings.wait and job_phase(job_states([job_id]).get(job_id, "")) in (QUEUED, RUNNING):
        time.sleep(settings.poll_seconds)
    if not settings.wait:
        console.print(
            f"slurm: follow it with `squeue -j {job_id}`; its log is {folder / 'logs' / 'train.out'}.",
            highlight=False,
            soft_wrap=True,
        )
        return 0
    outcome = job_outcome(folder / "submitit", job_id)
    if outcome is not None and outcome[0] == "success":
        _say(f"slurm: job {job_id} finished the run in {request.out}.")
        return 0
    state = job_states([job_id]).get(job_id, "") or "gone"
    why = outcome[1] if outcome is not None else f"it ended {state.split()[0]} without a result"
    print_error(f"slurm job {job_id}: {why} (log: {folder / 'logs' / 'train.out'}); rerun to resume.")
    return 1


def _submit(
    request: TrainRequest,
    settings: SlurmSettings,
    folder: Path,
    nodes: int,
    gpus_per_node: int,
    tasks: int,
    record: dict[str, Any],
) -> str:
    """Submit the run's job; record its id (the one before kept) and link its log as `logs/train.out`."""
    executor = slurm_executor(replace(settings, gpus=gpus_per_node), folder / "submitit", JOB_NAME)
    executor.update_parameters(nodes=nodes, tasks_per_node=tasks)
    (job_id,) = submit_array(executor, [TrainJob(request)])  # one job; sbatch's refusal is one line
    earlier = [*record.get("earlier_jobs", []), record["job_id"]] if record.get("job_id") else []
    link_logs(folder / "submitit", job_id, folder / "logs", "train")
    write_json_atomic(
        folder / "jobs.json",
        {"schema": JOBS_SCHEMA, "out": str(request.out), "job_id": job_id, "earlier_jobs": earlier},
    )
    console.print(
        f"slurm: submitted the run as job {job_id} ({nodes} node(s) x {tasks} task(s)); logs in "
        f"{folder / 'logs'}",
        highlight=False,
        soft_wrap=True,
    )
    return job_id


def _read(folder: Path) -> dict[str, Any]:
    """The run's jobs record ({} where there is none yet)."""
    path = folder / "jobs.json"
    if not path.exists():
        return {}
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read ({exc}); remove it and rerun to submit anew.") from None


def _say(line: str) -> None:
    """A line on stderr, unwrapped (paths stay whole)."""
    console.print(line, highlight=False, soft_wrap=True)
