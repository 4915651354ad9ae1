"""CLI command `train`: parse options into a `TrainConfig`, hand it to `plstitch_train.launch`, print JSON.

Every setting has a flag or `--set NAME=VALUE` (a flat name as `base_lr`, or `optim.base_lr`).

What a rerun, `--resume` or `--overwrite` does is decided in `plstitch_train.launch`; SIGINT/SIGTERM print
where the checkpoint is and how to resume (docs/training.md).

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from plstitch_eval.commands.options import (
    JsonOpt,
    TrainDecoderOpt,
    dataset_opt,
    device_opt,
    out_opt,
    root_opt,
    split_opt,
)
from plstitch_eval.commands.slurm_options import (
    GpusPerNodeOpt,
    NodesOpt,
    SlurmAccountOpt,
    SlurmConfigOpt,
    SlurmConstraintOpt,
    SlurmCpusOpt,
    SlurmMemOpt,
    SlurmPartitionOpt,
    SlurmQosOpt,
    SlurmSbatchOpt,
    SlurmTimeOpt,
    TasksPerNodeOpt,
    TrainExecutorOpt,
    WaitOpt,
)
from plstitch_train.config import RunConfig
from plstitch_train.presets import OBJECTIVES, PRESETS

_RUN = RunConfig()  # defaults of the run section, quoted in the help texts
_PRESET_HELP = "Preset: " + ", ".join(PRESETS) + "."
_OBJECTIVE_HELP = "Ranking objective: " + ", ".join(OBJECTIVES) + "."
_SET_HELP = (
    "Any training setting, repeatable: NAME=VALUE with a setting's name (base_lr) or section.name "
    "(optim.base_lr); VALUE is read as JSON when it parses (6, 0.5, true, null, [1, 2], {...}), else as text."
)
_INIT_HELP = (
    "Start from a released PL-Stitch checkpoint (pl-stitch-lemon, a pl_*.pth: backbones, iBOT heads, temporal"
    " and jigsaw heads) or from any other encoder spec (backbone only)."
)

DataOpt = Annotated[
    Path | None,
    typer.Option("--data", help="Folder of videos or frame folders, or a frames LMDB (authors' layout)."),
]
TrainDatasetOpt = dataset_opt("Dataset adapter name.", kind=str | None)
TrainRootOpt = root_opt("Dataset folder.")
TrainSplitOpt = split_opt("Dataset split to train on.")
RunOutOpt = out_opt("Run folder.", kind=Path | None, owned=True)
TrainDeviceOpt = device_opt(kind=str | None)
PresetOpt = Annotated[str, typer.Option("--preset", help=_PRESET_HELP)]
ConfigFileOpt = Annotated[
    Path | None, typer.Option("--config", help="Start from a train_config.json instead of --preset.")
]
InitOpt = Annotated[str | None, typer.Option("--init", help=_INIT_HELP)]
ResumeOpt = Annotated[
    Path | None,
    typer.Option("--resume", help="Run folder or last.ckpt to resume with its saved settings."),
]
OverwriteRunOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Replace the run in --out (its last.ckpt, log.jsonl, backbone/, train_config.json; the "
        "frame cache and other files stay) once the new settings have built a run.",
    ),
]
EpochsOpt = Annotated[int | None, typer.Option("--epochs", help="Training epochs.")]
StepsOpt = Annotated[int | None, typer.Option("--steps", help="Cap on optimizer steps.")]
BatchSizeOpt = Annotated[int | None, typer.Option("--batch-size", help="Global batch size.")]
AccumStepsOpt = Annotated[int | None, typer.Option("--accum-steps", help="Gradient accumulation.")]
BaseLrOpt = Annotated[float | None, typer.Option("--lr", help="Base lr (scaled by batch/256).")]
ObjectiveOpt = Annotated[str | None, typer.Option("--objective", help=_OBJECTIVE_HELP)]
ClipLenOpt = Annotated[int | None, typer.Option("--clip-len", help="Frames per clip (k).")]
LambdaVidOpt = Annotated[float | None, typer.Option("--lambda-vid", help="Weight of L_vid (0 = off).")]
LambdaMimOpt = Annotated[float | None, typer.Option("--lambda-mim", help="Weight of L_MIM (0 = off).")]
LambdaJigsawOpt = Annotated[
    float | None, typer.Option("--lambda-jigsaw", help="Weight of L_jigsaw (0 = off).")
]
ReverseTimeOpt = Annotated[bool, typer.Option("--reverse-time", help="Train on time-reversed videos.")]
TrainFpsOpt = Annotated[
    float | None,
    typer.Option(
        "--fps",
        help="Frames per second trained on (default: the preset's; a frames LMDB: its own rate).",
    ),
]
ContextSecondsOpt = Annotated[
    tuple[float, float] | None,
    typer.Option("--context-seconds", help="Past/future context offset range MIN MAX (seconds)."),
]
TrainPrecisionOpt = Annotated[str | None, typer.Option("--precision", help="auto, fp32, bf16 or fp16.")]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Random seed.")]
WorkersOpt = Annotated[
    int | None, typer.Option("--num-workers", "-j", help="DataLoader workers (decode the videos).")
]
CheckpointEveryOpt = Annotated[
    int | None, typer.Option("--checkpoint-every", help="Write last.ckpt every N steps.")
]
CacheDirOpt = Annotated[Path | None, typer.Option("--cache-dir", help="Decoded-frame cache folder.")]
FrameStoreOpt = Annotated[
    str | None,
    typer.Option("--frame-store", help="Decoded frames as lmdb (JPEG, default) or raw (uint8 arrays)."),
]
CompileOpt = Annotated[
    bool,
    typer.Option(
        "--compile",
        help="torch.compile the student and teacher (fused kernels on a GPU; the first steps compile).",
    ),
]
CollapseEveryOpt = Annotated[
    int | None,
    typer.Option(
        "--collapse-every",
        help="Measure the iBOT teacher's collapse every N steps on a fixed probe batch (0 = never; "
        "default 50; only with L_MIM).",
    ),
]
StopOnCollapseOpt = Annotated[
    bool,
    typer.Option(
        "--stop-on-collapse",
        help="End the run with its checkpoint saved once the collapse monitor warns (exit code 3).",
    ),
]
EvalEveryOpt = Annotated[
    int | None,
    typer.Option(
        "--eval-every",
        help="Every N steps and at the last, the teacher's k-NN accuracy (plstitch knn's protocol) on "
        f"--eval-dataset, logged as knn_acc (0 = never; default {_RUN.eval_every}).",
    ),
]
EvalDatasetOpt = Annotated[
    str | None,
    typer.Option(
        "--eval-dataset",
        help="Dataset adapter of the k-NN evaluation (plstitch datasets; synthetic needs no root): its "
        "train split votes for the query split.",
    ),
]
EvalRootOpt = Annotated[Path | None, typer.Option("--eval-root", help="Folder of --eval-dataset.")]
EvalSplitOpt = Annotated[
    str | None,
    typer.Option(
        "--eval-split",
        help="Query split of the k-NN evaluation: val or test (default: val if the dataset has one, "
        "else test). Recorded only: weights are never chosen by it.",
    ),
]
EvalFpsOpt = Annotated[
    float | None,
    typer.Option(
        "--eval-fps",
        help="Frames per second of the k-NN evaluation, as plstitch extract --fps (default "
        f"{_RUN.eval_fps:g}).",
    ),
]
SetOpt = Annotated[list[str] | None, typer.Option("--set", metavar="NAME=VALUE", help=_SET_HELP)]


def train(
    data: DataOpt = None,
    dataset: TrainDatasetOpt = None,
    root: TrainRootOpt = None,
    split: TrainSplitOpt = None,
    preset: PresetOpt = "paper-vitb16",
    config_file: ConfigFileOpt = None,
    init: InitOpt = None,
    out: RunOutOpt = None,
    resume: ResumeOpt = None,
    overwrite: OverwriteRunOpt = False,
    epochs: EpochsOpt = None,
    steps: StepsOpt = None,
    batch_size: BatchSizeOpt = None,
    accum_steps: AccumStepsOpt = None,
    lr: BaseLrOpt = None,
    objective: ObjectiveOpt = None,
    clip_len: ClipLenOpt = None,
    lambda_vid: LambdaVidOpt = None,
    lambda_mim: LambdaMimOpt = None,
    lambda_jigsaw: LambdaJigsawOpt = None,
    reverse_time: ReverseTimeOpt = False,
    fps: TrainFpsOpt = None,
    context_seconds: ContextSecondsOpt = None,
    device: TrainDeviceOpt = None,
    precision: TrainPrecisionOpt = None,
    seed: SeedOpt = None,
    num_workers: WorkersOpt = None,
    checkpoint_every: CheckpointEveryOpt = None,
    cache_dir: CacheDirOpt = None,
    frame_store: FrameStoreOpt = None,
    decoder: TrainDecoderOpt = None,
    compile_modules: CompileOpt = False,
    collapse_every: CollapseEveryOpt = None,
    stop_on_collapse: StopOnCollapseOpt = False,
    eval_every: EvalEveryOpt = None,
    eval_dataset: EvalDatasetOpt = None,
    eval_root: EvalRootOpt = None,
    eval_split: EvalSplitOpt = None,
    eval_fps: EvalFpsOpt = None,
    set_values: SetOpt = None,
    executor: TrainExecutorOpt = "local",
    nodes: NodesOpt = 1,
    gpus_per_node: GpusPerNodeOpt = 0,
    tasks_per_node: TasksPerNodeOpt = None,
    wait: WaitOpt = False,
    slurm_partition: SlurmPartitionOpt = None,
    slurm_account: SlurmAccountOpt = None,
    slurm_time: SlurmTimeOpt = None,
    slurm_cpus: SlurmCpusOpt = None,
    slurm_mem: SlurmMemOpt = None,
    slurm_qos: SlurmQosOpt = None,
    slurm_constraint: SlurmConstraintOpt = None,
    slurm_sbatch: SlurmSbatchOpt = None,
    slurm_config: SlurmConfigOpt = None,
) -> None:
    """Pretrain PL-Stitch (L_vid + L_MIM + L_jigsaw) on videos; resumable, DDP under torchrun.

    Rerunning the same command resumes the run in --out; a finished run is left as it is (exit 0).

    A run made with other settings is refused: --resume RUN continues it with its saved settings,
    --overwrite starts again. --device, --num-workers, --checkpoint-every, --cache-dir, --compile,
    --collapse-every, --stop-on-collapse and the --eval-* options may change.

    Ctrl-C or SIGTERM: checkpoint after the current step, print the resume command, exit 130 / 143.
    A second Ctrl-C stops at once. --stop-on-collapse: checkpoint, one line, exit 3.
    --executor slurm: one Slurm job, requeued from the last checkpoint (docs/cluster.md).
    """
    from plstitch_eval.cluster import executor_settings
    from plstitch_train.slurm import train_where

    request = _train_request(locals())
    slurm = executor_settings(
        executor, slurm_config, wait=wait, partition=slurm_partition, account=slurm_account, time=slurm_time,
        cpus=slurm_cpus, mem=slurm_mem, qos=slurm_qos, constraint=slurm_constraint, sbatch=slurm_sbatch,
    )  # fmt: skip
    code = train_where(request, slurm, nodes, gpus_per_node, tasks_per_node)
    if code:
        raise typer.Exit(code=code)


# the TrainConfig settings the flags give, in order; each is the argument of its name but those renamed
SETTINGS = (
    "data", "dataset", "root", "split", "init", "epochs", "max_steps", "batch_size", "accum_steps", "base_lr",
    "objective", "clip_len", "lambda_vid", "lambda_mim", "lambda_jigsaw", "reverse_time", "fps",
    "context_seconds", "precision", "seed", "device", "num_workers", "checkpoint_every", "cache_dir",
    "frame_store", "decoder", "compile", "collapse_every", "stop_on_collapse", "eval_every", "eval_dataset",
    "eval_root", "eval_split", "eval_fps",
)  # fmt: skip
RENAMED = {"max_steps": "steps", "base_lr": "lr", "compile": "compile_modules"}  # setting: argument


def _train_request(args: dict[str, Any]) -> Any:
    """The `TrainRequest` of `train`'s arguments (`args`, by name): its settings, `--set` items, preset or
    config file and run folder."""
    from plstitch_train.launch import TrainRequest

    settings = {name: args[RENAMED.get(name, name)] for name in SETTINGS}
    return TrainRequest(
        settings, list(args["set_values"] or []), args["preset"], args["config_file"], args["out"],
        resume=args["resume"], overwrite=args["overwrite"],
    )  # fmt: skip


def objectives(json_path: JsonOpt = None) -> None:
    """List the L_vid training objectives (`train --objective`): name, package and what each is."""
    from rich.text import Text

    from plstitch_eval.utils.console import result_console
    from plstitch_eval.utils.io import write_json_output
    from plstitch_train.losses.registry import OBJECTIVE_REGISTRY

    rows = [
        {
            "name": name,
            "package": OBJECTIVE_REGISTRY.package(name),
            "summary": ((cls.__doc__ or "").strip().splitlines() or [""])[0],
        }
        for name, cls in OBJECTIVE_REGISTRY.items()
    ]
    if json_path is not None:
        write_json_output(json_path, {"objectives": rows})
        if str(json_path) == "-":
            return
    out = result_console(soft_wrap=True)
    out.print(Text("Training objectives (train --objective NAME)", style="bold"))
    for row in rows:
        out.print(Text(f"{row['name']}  (from {row['package']}): {row['summary']}"))
    for name, why in OBJECTIVE_REGISTRY.failed.items():
        out.print(Text(f"{name}: did not load ({why})", style="yellow"))


def register(app: typer.Typer) -> None:
    """Add `train` to the top-level app."""
    app.command("train")(train)
    app.command("objectives")(objectives)
