"""The options of running a command's work as Slurm jobs (`--executor`, `--slurm-*`, `--wait`): one typed
alias each, for `benchmark` now and the commands that gain `--executor slurm` next. What they become is
`cluster.SlurmSettings` (through `benchmark.session.slurm_launch`); their defaults are its fields' (None:
the `[slurm]` table's value, else the dataclass default)."""

from __future__ import annotations

from typing import Annotated

import typer

PANEL = "Slurm (--executor slurm, docs/cluster.md)"

ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="local (here, as always) or slurm: each cell not yet done is one Slurm job (submitit; "
        "`pip install 'plstitch[slurm]'`); a rerun submits only what is missing or failed.",
        rich_help_panel=PANEL,
    ),
]
StatusOpt = Annotated[
    bool,
    typer.Option(
        "--status",
        help="Only say how each cell of the Slurm run in --out stands (done, queued, running, failed): JSON "
        "on stdout, a table on stderr; --models and --datasets are not needed.",
        rich_help_panel=PANEL,
    ),
]
WaitOpt = Annotated[
    bool,
    typer.Option(
        "--wait",
        help="Wait for the jobs, then write the table (default: submit and return; rerun the command once "
        "they have ended to write it).",
        rich_help_panel=PANEL,
    ),
]
SlurmPartitionOpt = Annotated[
    str | None, typer.Option("--slurm-partition", help="Partition of the jobs.", rich_help_panel=PANEL)
]
SlurmAccountOpt = Annotated[
    str | None, typer.Option("--slurm-account", help="Account charged.", rich_help_panel=PANEL)
]
SlurmTimeOpt = Annotated[
    int | None,
    typer.Option("--slurm-time", help="Minutes a job may run (default 60).", rich_help_panel=PANEL),
]
SlurmGpusOpt = Annotated[
    int | None, typer.Option("--slurm-gpus", help="GPUs per job (default 0).", rich_help_panel=PANEL)
]
SlurmCpusOpt = Annotated[
    int | None, typer.Option("--slurm-cpus", help="CPUs per job (--cpus-per-task).", rich_help_panel=PANEL)
]
SlurmMemOpt = Annotated[
    str | None, typer.Option("--slurm-mem", help="Memory per job, e.g. 32G.", rich_help_panel=PANEL)
]
SlurmQosOpt = Annotated[
    str | None, typer.Option("--slurm-qos", help="Quality of service.", rich_help_panel=PANEL)
]
SlurmConstraintOpt = Annotated[
    str | None, typer.Option("--slurm-constraint", help="Node features, e.g. a100.", rich_help_panel=PANEL)
]
SlurmSbatchOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--slurm-sbatch",
        metavar="--KEY=VALUE",
        help="Any other sbatch option, repeatable (e.g. --slurm-sbatch=--exclusive).",
        rich_help_panel=PANEL,
    ),
]
