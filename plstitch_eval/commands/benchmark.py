"""CLI command `benchmark`: models x datasets x protocols (x tasks) in one resumable run, then the tables.

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from plstitch_eval.commands.options import (
    BenchmarkSetOpt,
    CausalOpt,
    CropMarginOpt,
    DecodeDeviceOpt,
    DecoderOpt,
    EncodeBatchOpt,
    EncodeDeviceOpt,
    FpsOpt,
    FractionSeedsOpt,
    KnnKOpt,
    LrGridOpt,
    NumWorkersOpt,
    OptimizerOpt,
    PrecisionOpt,
    SelectMetricOpt,
    TemperatureOpt,
    TrustPickleOpt,
    WdGridOpt,
    WeightingOpt,
    encode_settings,
    given,
    json_opt,
    out_opt,
)
from plstitch_eval.commands.probe_configs import knn_config, linear_config, temporal_config
from plstitch_eval.commands.slurm_options import (
    ExecutorOpt,
    SlurmAccountOpt,
    SlurmConstraintOpt,
    SlurmCpusOpt,
    SlurmGpusOpt,
    SlurmMemOpt,
    SlurmPartitionOpt,
    SlurmQosOpt,
    SlurmSbatchOpt,
    SlurmTimeOpt,
    StatusOpt,
    WaitOpt,
)

if TYPE_CHECKING:
    from plstitch_eval.benchmark.config import BenchmarkConfig

ModelsOpt = Annotated[
    str | None,
    typer.Option(
        "--models",
        "-m",
        help="Comma-separated encoder specs (registry names, hf-hub:..., random-init:SPEC, folders, "
        "checkpoints) or collections: paper-surgical, paper-cooking, 2026 (docs/benchmark.md).",
    ),
]
DatasetsOpt = Annotated[
    str | None,
    typer.Option(
        "--datasets",
        "-d",
        help="Comma-separated NAME or NAME=ROOT (adapters of `plstitch datasets`), or a .toml/.yaml file "
        "of datasets with their roots and options (docs/benchmark.md).",
    ),
]
BenchmarkOutOpt = out_opt("Output folder: features/, results/, table.md, table.json.", owned=True)
ProtocolsOpt = Annotated[
    str,
    typer.Option(
        "--protocols",
        "-p",
        help="knn, linear, temporal (MS-TCN), cv and/or linear-tools (tool presence, mAP).",
    ),
]
MetricsOpt = Annotated[
    str | None,
    typer.Option("--metrics", help="Table columns, e.g. accuracy,macro_f1_video (default: per dataset)."),
]
ConfigFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="A .toml/.yaml file of [protocols.NAME] tables: any protocol's settings, e.g. "
        "[protocols.knn] k = 10 (docs/benchmark.md).",
        dir_okay=False,
    ),
]
LinearEpochsOpt = Annotated[int | None, typer.Option(help="Linear-probe epochs (default 20).")]
BenchmarkSeedOpt = Annotated[
    int | None, typer.Option(help="Seed of the linear probe, the MS-TCN and the CV folds (default 0).")
]
FoldsOpt = Annotated[int, typer.Option(help="cv: number of folds (split by video).")]
SkillFoldsOpt = Annotated[
    str | None,
    typer.Option(
        "--skill-folds",
        help="--tasks skill, cv: louo (leave one user out), loso (leave one supertrial out; JIGSAWS trial "
        "names, one cell without a seed) or a number of folds by video (default --folds).",
    ),
]
CvProtocolOpt = Annotated[str, typer.Option("--cv-protocol", help="cv: knn, linear or temporal.")]
TemporalEpochsOpt = Annotated[
    int | None, typer.Option("--temporal-epochs", help="temporal: MS-TCN epochs (default 50).")
]
OverwriteCellsOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite", help="Recompute results made with other settings; replace stores made differently."
    ),
]
FractionsOpt = Annotated[
    str | None,
    typer.Option(
        "--fractions",
        help="Label efficiency: every cell at each share of the training videos, e.g. 0.125,0.25,0.5,1 "
        "(default 1: all; nested subsets, the same for every model); OUT/label_efficiency.md, .json, .png.",
    ),
]
TasksOpt = Annotated[
    str,
    typer.Option(
        "--tasks",
        help="Comma-separated tasks: phases (the phase table), anticipation, rsd, tools, triplets, cvs, "
        "skill or a plugin's regression task (`plstitch tasks`); each gets cells per protocol and seed, a "
        "table section with paired differences and OUT/tasks.png (docs/benchmark.md#tasks).",
    ),
]
BenchmarkHorizonOpt = Annotated[
    float | None,
    typer.Option("--horizon", help="--tasks anticipation: the horizon in minutes (default 3)."),
]
BenchmarkAnticipateOpt = Annotated[
    str | None,
    typer.Option(
        "--anticipate",
        help="--tasks anticipation: phases, tools or phases,tools (default auto: phases, and "
        "tools where the store has tool labels).",
    ),
]
SeedsOpt = Annotated[
    str | None,
    typer.Option(
        "--seeds",
        help="--tasks: the seeds of the linear, temporal and cv cells, e.g. 0,1,2 (or a count: 3 = 0,1,2; "
        "default --seed); mean ± std over them. k-NN and skill's linear ridge are deterministic: one cell.",
    ),
]
TableJsonOpt = json_opt("Also write the table JSON to this file; - prints it on stdout.")


def benchmark(
    out: BenchmarkOutOpt,
    models: ModelsOpt = None,
    datasets: DatasetsOpt = None,
    protocols: ProtocolsOpt = "knn,linear",
    tasks: TasksOpt = "phases",
    horizon: BenchmarkHorizonOpt = None,
    anticipate: BenchmarkAnticipateOpt = None,
    seeds: SeedsOpt = None,
    metrics: MetricsOpt = None,
    config_file: ConfigFileOpt = None,
    set_items: BenchmarkSetOpt = None,
    k: KnnKOpt = None,
    temperature: TemperatureOpt = None,
    weighting: WeightingOpt = None,
    lr: LrGridOpt = None,
    wd: WdGridOpt = None,
    optimizer: OptimizerOpt = None,
    epochs: LinearEpochsOpt = None,
    select_metric: SelectMetricOpt = None,
    seed: BenchmarkSeedOpt = None,
    folds: FoldsOpt = 5,
    skill_folds: SkillFoldsOpt = None,
    cv_protocol: CvProtocolOpt = "knn",
    temporal_epochs: TemporalEpochsOpt = None,
    causal: CausalOpt = False,
    fractions: FractionsOpt = None,
    fraction_seeds: FractionSeedsOpt = None,
    fps: FpsOpt = None,
    batch_size: EncodeBatchOpt = None,
    num_workers: NumWorkersOpt = None,
    device: EncodeDeviceOpt = None,
    crop_black_margin: CropMarginOpt = False,
    decoder: DecoderOpt = None,
    decode_device: DecodeDeviceOpt = None,
    precision: PrecisionOpt = None,
    trust_pickle: TrustPickleOpt = False,
    overwrite: OverwriteCellsOpt = False,
    json_path: TableJsonOpt = None,
    executor: ExecutorOpt = "local",
    status: StatusOpt = False,
    wait: WaitOpt = False,
    slurm_partition: SlurmPartitionOpt = None,
    slurm_account: SlurmAccountOpt = None,
    slurm_time: SlurmTimeOpt = None,
    slurm_gpus: SlurmGpusOpt = None,
    slurm_cpus: SlurmCpusOpt = None,
    slurm_mem: SlurmMemOpt = None,
    slurm_qos: SlurmQosOpt = None,
    slurm_constraint: SlurmConstraintOpt = None,
    slurm_sbatch: SlurmSbatchOpt = None,
) -> None:
    """Evaluate every model on every dataset with every protocol (and task); print the paper-style table.

    One feature store per (model, dataset), one results JSON per cell, the table in OUT/table.md and
    OUT/table.json with the paper's numbers beside ours (--tasks: a section per regression task). Rerunning
    the same command finishes only what is missing. A failing cell is named in the table; exit code 1.
    Under torchrun (`torchrun ... -m plstitch_eval benchmark ...`) extraction is sharded over the ranks;
    with --executor slurm each cell is a Slurm job (docs/cluster.md).
    """
    from plstitch_eval.benchmark.session import benchmark_session, slurm_launch
    from plstitch_eval.benchmark.slurm_status import print_benchmark_status

    if status:
        raise typer.Exit(code=print_benchmark_status(out))
    config = benchmark_config(locals())  # every option above, as the command parsed it
    slurm = slurm_launch(
        executor, config_file, wait=wait, partition=slurm_partition, account=slurm_account, time=slurm_time,
        gpus=slurm_gpus, cpus=slurm_cpus, mem=slurm_mem, qos=slurm_qos, constraint=slurm_constraint,
        sbatch=slurm_sbatch,
    )  # fmt: skip
    code = benchmark_session(config, json_path, slurm)
    if code:
        raise typer.Exit(code=code)


def benchmark_config(options: Mapping[str, Any]) -> BenchmarkConfig:
    """The run's `BenchmarkConfig` from `benchmark`'s options by name: the protocols' settings of `--config`
    and `--set` with the flags over them, the encode settings, the cells' lists."""
    from plstitch_eval.benchmark.config import BenchmarkConfig
    from plstitch_eval.benchmark.session import protocol_tables
    from plstitch_eval.errors import ConfigError
    from plstitch_eval.extract import ExtractOptions

    o = SimpleNamespace(**options)
    if o.models is None or o.datasets is None:
        raise ConfigError("benchmark needs --models and --datasets (only --status goes without them).")
    settings = protocol_tables(o.config_file, o.set_items, o.device)  # the flags go over --config and --set
    encode = encode_settings(
        batch_size=o.batch_size, num_workers=o.num_workers, device=o.device, precision=o.precision,
        decoder=o.decoder, decode_device=o.decode_device,
    )  # fmt: skip
    return BenchmarkConfig(
        models=o.models,
        datasets=o.datasets,
        out=o.out,
        protocols=o.protocols,
        metrics=o.metrics,
        extract=ExtractOptions(**encode, **given(fps=o.fps), crop_black_margin=o.crop_black_margin),
        knn=knn_config(o.k, o.temperature, o.weighting, **settings.section("knn")),
        linear=linear_config(
            o.lr,
            o.wd,
            o.optimizer,
            o.epochs,
            select_metric=o.select_metric,
            seed=o.seed,
            **settings.section("linear"),
        ),
        temporal=temporal_config(
            epochs=o.temporal_epochs, causal=o.causal or None, seed=o.seed, **settings.section("temporal")
        ),
        protocol_configs=settings.unsectioned,
        cv_folds=o.folds,
        cv_protocol=o.cv_protocol,
        **given(cv_seed=o.seed, fractions=o.fractions, fraction_seeds=o.fraction_seeds, seeds=o.seeds),
        **given(tasks=o.tasks, horizon=o.horizon, anticipate=o.anticipate, skill_folds=o.skill_folds),
        overwrite=o.overwrite,
        trust_pickle=o.trust_pickle,
    )


def register(app: typer.Typer) -> None:
    """Add `benchmark` to the top-level app."""
    app.command("benchmark")(benchmark)
