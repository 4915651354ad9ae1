"""The options of running a command's work as Slurm jobs (`--executor`, `--slurm-*`, `--wait`): one typed
alias each, for `benchmark` now and the commands that gain `--executor slurm` next. What they become is
`cluster.SlurmSettings` (through `benchmark.session.slurm_launch`); their defaults are its fields' (None:
the `[slurm]` table's value, else the dataclass default)."""

from __future__ import annotations

from pathlib import Path
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
        help="Wait for the jobs, then write what follows them: benchmark's table, extract's summary, how a "
        "train job ended (default: submit and return; rerun the command once they have ended).",
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
ExtractExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="local (here, as always) or slurm: the videos as --shards Slurm jobs (a job array) writing into "
        "the one store; a rerun submits only shards with videos missing (`pip install 'plstitch[slurm]'`).",
        rich_help_panel=PANEL,
    ),
]
ShardsOpt = Annotated[
    int,
    typer.Option(
        "--shards",
        min=1,
        help="With --executor slurm: how many jobs share the videos (video i goes to job i mod N).",
        rich_help_panel=PANEL,
    ),
]
ExtractStatusOpt = Annotated[
    bool,
    typer.Option(
        "--status",
        help="Only say how each shard of the Slurm extraction into --out stands (done, queued, running, "
        "failed, videos stored): JSON on stdout, a line a shard on stderr.",
        rich_help_panel=PANEL,
    ),
]
TrainExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="local (here, as always; torchrun for several GPUs) or slurm: the run as one Slurm job of "
        "--nodes x --gpus-per-node processes, requeued from its last checkpoint "
        "(`pip install 'plstitch[slurm]'`).",
        rich_help_panel=PANEL,
    ),
]
NodesOpt = Annotated[
    int,
    typer.Option("--nodes", min=1, help="With --executor slurm: nodes of the job.", rich_help_panel=PANEL),
]
GpusPerNodeOpt = Annotated[
    int,
    typer.Option(
        "--gpus-per-node",
        min=0,
        help="GPUs per node, one process each (0: CPU, gloo).",
        rich_help_panel=PANEL,
    ),
]
TasksPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--tasks-per-node",
        min=1,
        help="Processes per node (default: --gpus-per-node, or 1 without GPUs).",
        rich_help_panel=PANEL,
    ),
]
SlurmConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--slurm-config",
        help="A TOML file whose [slurm] table holds the Slurm settings (the keys of docs/cluster.md; the "
        "--slurm-* flags go over it).",
        rich_help_panel=PANEL,
    ),
]
