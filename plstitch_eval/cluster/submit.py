"""Jobs on Slurm through submitit (the optional extra `plstitch[slurm]`): the executor a run's settings make,
job arrays of many calls, and each job's log linked under a name of the caller's (e.g. the cell's)."""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from plstitch_eval.cluster.settings import SlurmSettings
from plstitch_eval.errors import ConfigError

__all__ = ["SLURM_EXTRA", "import_submitit", "job_log", "link_logs", "slurm_executor", "submit_array"]

SLURM_EXTRA = "pip install 'plstitch[slurm]'"


def import_submitit() -> ModuleType:
    """submitit, or one line saying how to install it (it is an optional extra)."""
    try:
        import submitit
    except ImportError:
        raise ConfigError(f"--executor slurm needs submitit: {SLURM_EXTRA}") from None
    return submitit


def slurm_executor(settings: SlurmSettings, folder: Path, name: str) -> Any:
    """A submitit executor for Slurm writing its pickles and logs to `folder`; every job runs this very
    Python (`sys.executable`, so the jobs import the same plstitch) with `settings`' resources."""
    submitit = import_submitit()
    if shutil.which("sbatch") is None or shutil.which("srun") is None:
        raise ConfigError(
            "--executor slurm: sbatch and srun are not on PATH; run the command on a Slurm login node, "
            "or use --executor local."
        )
    executor = submitit.AutoExecutor(folder=folder, cluster="slurm", slurm_python=shlex.quote(sys.executable))
    resources = {
        "slurm_partition": settings.partition,
        "slurm_account": settings.account,
        "slurm_qos": settings.qos,
        "slurm_constraint": settings.constraint,
        "cpus_per_task": settings.cpus,
        "gpus_per_node": settings.gpus or None,
    }
    extra = dict(settings.sbatch_options())
    if settings.mem is not None:
        extra["mem"] = settings.mem
    executor.update_parameters(
        name=name,
        timeout_min=settings.time,
        slurm_additional_parameters=extra,
        **{key: value for key, value in resources.items() if value is not None},
    )
    return executor


def submit_array(executor: Any, calls: Sequence[Callable[[], Any]]) -> list[str]:
    """Submit each call as one job, all of them as one job array (`executor.batch()`: the jobs share the
    executor's resources); their Slurm ids (`ARRAY_TASK`), in order."""
    if not calls:
        return []
    submitit = import_submitit()
    try:
        with contextlib.redirect_stderr(io.StringIO()), executor.batch():  # submitit prints sbatch's refusal
            jobs = [executor.submit(call) for call in calls]
    except submitit.core.utils.FailedJobError as exc:  # sbatch said no: a partition, account, QoS, ...
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        raise ConfigError(f"sbatch refused the jobs: {lines[-1] if lines else exc!r}") from None
    return [str(job.job_id) for job in jobs]


def job_log(folder: Path, job_id: str, stream: str) -> Path:
    """Where submitit has Slurm write a job's stdout (`out`) or stderr (`err`): `<id>_0_log.<stream>`."""
    paths = import_submitit().core.utils.JobPaths(folder, job_id=job_id, task_id=0)
    return paths.stdout if stream == "out" else paths.stderr


def link_logs(folder: Path, job_id: str, links: Path, name: str) -> Path:
    """Link the job's logs as `links/<name>.out` and `.err` (relative links, replaced by a rerun's job);
    returns the `.out` link."""
    links.mkdir(parents=True, exist_ok=True)
    for stream in ("out", "err"):
        link = links / f"{name}.{stream}"
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(job_log(folder, job_id, stream), links))
    return links / f"{name}.out"
