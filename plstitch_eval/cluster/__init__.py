"""Running a command's work beyond this process: `--executor local|slurm`, the Slurm settings (`[slurm]` table
and `--slurm-*` flags), submission through submitit (the extra `plstitch[slurm]`) and how a job stands.
Commands use it for their own units of work: `plstitch benchmark` one job per cell (docs/cluster.md)."""

from plstitch_eval.cluster.settings import (
    EXECUTORS,
    LOCAL,
    SLURM,
    SlurmSettings,
    check_executor,
    executor_settings,
    read_slurm_file,
    slurm_settings,
)
from plstitch_eval.cluster.states import (
    ENDED,
    QUEUED,
    RUNNING,
    UNKNOWN,
    job_outcome,
    job_phase,
    job_states,
)
from plstitch_eval.cluster.submit import (
    SLURM_EXTRA,
    import_submitit,
    job_log,
    link_logs,
    slurm_executor,
    submit_array,
)

__all__ = [
    "ENDED",
    "EXECUTORS",
    "LOCAL",
    "QUEUED",
    "RUNNING",
    "SLURM",
    "SLURM_EXTRA",
    "UNKNOWN",
    "SlurmSettings",
    "check_executor",
    "executor_settings",
    "import_submitit",
    "job_log",
    "job_outcome",
    "job_phase",
    "job_states",
    "link_logs",
    "read_slurm_file",
    "slurm_executor",
    "slurm_settings",
    "submit_array",
]
