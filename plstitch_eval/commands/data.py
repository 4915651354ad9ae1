"""CLI commands for data: `datasets` (list adapters), `extract` (frozen features), `export-mstcn`."""

from __future__ import annotations

import inspect
import json
import textwrap
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from plstitch_eval.commands.options import (
    CropMarginOpt,
    DatasetOpt,
    DatasetSchemeOpt,
    DecodeDeviceOpt,
    DecoderOpt,
    EncodeBatchOpt,
    EncodeDeviceOpt,
    FpsOpt,
    NumWorkersOpt,
    PrecisionOpt,
    ResizeOnDecodeOpt,
    RevisionOpt,
    RootOpt,
    SplitOpt,
    TransformOpt,
    TrustPickleOpt,
    WhichOpt,
    encode_settings,
    given,
    json_opt,
    out_opt,
)
from plstitch_eval.commands.slurm_options import (
    ExtractExecutorOpt,
    ExtractStatusOpt,
    ShardsOpt,
    SlurmAccountOpt,
    SlurmConfigOpt,
    SlurmConstraintOpt,
    SlurmCpusOpt,
    SlurmGpusOpt,
    SlurmMemOpt,
    SlurmPartitionOpt,
    SlurmQosOpt,
    SlurmSbatchOpt,
    SlurmTimeOpt,
    WaitOpt,
)
from plstitch_eval.utils.console import result_console

StoreOutOpt = out_opt(
    "Feature store folder (created or resumed); with several --model, the folder of their stores "
    "(one per model: <out>/<model name>).",
    owned=True,
)
ModelsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--model",
        "-m",
        help="Registry name, hf-hub:ORG/NAME, folder or checkpoint file. Repeat it to extract several "
        "encoders in one pass: each video is decoded once, each model gets its own store under --out.",
    ),
]
VideosOpt = Annotated[str | None, typer.Option("--videos", help="Only these videos (comma-separated names).")]
RedoOpt = Annotated[
    str | None,
    typer.Option(
        "--redo",
        help="Extract these videos again (comma-separated names) even when their stored files check out; "
        "the others resume as usual.",
    ),
]
OverwriteStoreOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace a store made with another model/preprocessing/fps.")
]
FailFastOpt = Annotated[
    bool, typer.Option("--fail-fast", help="Stop at the first video that cannot be decoded.")
]
FramesOpt = Annotated[
    Path | None,
    typer.Option(
        "--frames",
        help="Read the frames from this frame cache (`plstitch write-lmdb --dataset D --eval-frames`) "
        "instead of decoding the videos; labels still come from the dataset.",
    ),
]
SummaryJsonOpt = json_opt("Write the run summary JSON to this file; - prints it on stdout.")
MstcnOutOpt = out_opt(
    "Output folder in MS-TCN layout: a new or empty folder, or an earlier export with --overwrite.",
    replaced=True,
)
OverwriteMstcnOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Replace an earlier export-mstcn folder: what its plstitch_mstcn.json lists (a folder holding "
        "anything else is refused).",
    ),
]


def datasets() -> None:
    """List the dataset adapters: classes, native fps, evaluation fps, split schemes and layout.

    One block per dataset (its name alone on the first line, then its facts and layout indented), wrapped to
    the terminal's width, so that it reads at 80 columns.
    """
    from plstitch_eval.data.datasets.registry import DATASETS, dataset_class, list_datasets
    from plstitch_eval.registry import SHIPPED_PACKAGE

    out = result_console(soft_wrap=True)  # the list is a result: stdout; lines wrapped here, not by rich
    width = max(40, out.width) - 2
    out.print(Text("Dataset adapters", style="bold"))
    for name in list_datasets():
        cls = dataset_class(name)
        layout = (inspect.getdoc(inspect.getmodule(cls)) or inspect.getdoc(cls) or "").split("\n\n")[0]
        classes = f"{len(cls.class_names)} classes" if cls.class_names else _unnamed_classes(cls)
        facts = (
            f"{classes}; {cls.native_fps:g} fps native, evaluated at {cls.default_eval_fps:g} fps; "
            f"split schemes: {', '.join(cls.split_schemes)}"
        )
        out.print()
        package = DATASETS.package(name)
        out.print(Text(name if package == SHIPPED_PACKAGE else f"{name} (from {package})", style="bold cyan"))
        for text, style in ((facts, ""), (" ".join(layout.split()), "dim")):
            for line in textwrap.wrap(text, width, break_on_hyphens=False):
                out.print(Text(f"  {line}", style=style))


def _unnamed_classes(cls: Any) -> str:
    """What `plstitch datasets` says of an adapter naming no classes: its other labels, or its files'."""
    other = [f"{what} ({len(names)})" for what, names in (("CVS criteria", cls.cvs_names),) if names]
    if getattr(cls, "skill_names", None):
        other.append("skill scores per video")
    return "no per-frame classes; " + ", ".join(other) if other else "classes from its files"


def extract(
    dataset: DatasetOpt,
    out: StoreOutOpt,
    root: RootOpt = None,
    model: ModelsOpt = None,
    revision: RevisionOpt = None,
    trust_pickle: TrustPickleOpt = False,
    fps: FpsOpt = None,
    batch_size: EncodeBatchOpt = None,
    num_workers: NumWorkersOpt = None,
    device: EncodeDeviceOpt = None,
    precision: PrecisionOpt = None,
    split: SplitOpt = None,
    split_scheme: DatasetSchemeOpt = None,
    videos: VideosOpt = None,
    redo: RedoOpt = None,
    resize_on_decode: ResizeOnDecodeOpt = False,
    crop_black_margin: CropMarginOpt = False,
    decoder: DecoderOpt = None,
    decode_device: DecodeDeviceOpt = None,
    overwrite: OverwriteStoreOpt = False,
    fail_fast: FailFastOpt = False,
    which: WhichOpt = None,
    transform: TransformOpt = None,
    frames: FramesOpt = None,
    json_path: SummaryJsonOpt = None,
    executor: ExtractExecutorOpt = "local",
    shards: ShardsOpt = 1,
    status: ExtractStatusOpt = False,
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
    slurm_config: SlurmConfigOpt = None,
) -> None:
    """Extract frozen per-frame CLS features of a dataset into a resumable feature store.

    Several --model: every video is decoded once for all of them, each model into its own store
    <out>/<name> (the registry name, or the spec made filesystem-safe), each equal to a one-model run's.
    Rerunning the same command resumes (a damaged feature file is extracted again); runs started at the same
    time into one --out share the videos; under torchrun (`torchrun ... -m plstitch_eval extract ...`) each
    rank takes a disjoint share of the videos.

    --executor slurm --shards N: N Slurm jobs share the videos, into the same store (docs/cluster.md).
    """
    # imported when run: the extraction and hub packages pull in torchvision, torchcodec and timm (measured
    # +10 s or more on a 6 to 7 s start-up of `plstitch --help`, 2 busy cores)
    from plstitch_eval.cluster import executor_settings
    from plstitch_eval.extract import ExtractRequest
    from plstitch_eval.extract.slurm_run import extract_where, print_extract_status

    if status:
        raise typer.Exit(code=print_extract_status(out))
    options = _extract_options(
        batch_size, num_workers, device, precision, decoder, decode_device, fps=fps, overwrite=overwrite,
        fail_fast=fail_fast, videos=videos, redo=redo, split=split, split_scheme=split_scheme,
        resize_on_decode=resize_on_decode, crop_black_margin=crop_black_margin, frames=frames,
    )  # fmt: skip
    slurm = executor_settings(
        executor, slurm_config, wait=wait, partition=slurm_partition, account=slurm_account, time=slurm_time,
        gpus=slurm_gpus, cpus=slurm_cpus, mem=slurm_mem, qos=slurm_qos, constraint=slurm_constraint,
        sbatch=slurm_sbatch,
    )  # fmt: skip
    load = {"revision": revision, "trust_pickle": trust_pickle, "transform": transform, **given(which=which)}
    request = ExtractRequest(dataset, out, root, model, load, json_path)
    code = extract_where(request, options, slurm, shards)
    if code:
        raise typer.Exit(code=code)


def _extract_options(
    batch_size: int | None,
    num_workers: int | None,
    device: str | None,
    precision: str | None,
    decoder: str | None,
    decode_device: str | None,
    **settings: Any,
) -> Any:
    """The `ExtractOptions` of the command's flags (the encode settings through `encode_settings`)."""
    from plstitch_eval.extract import ExtractOptions, video_names

    encode = encode_settings(
        batch_size=batch_size,
        num_workers=num_workers,
        device=device,
        precision=precision,
        decoder=decoder,
        decode_device=decode_device,
    )
    videos, redo = video_names(settings.pop("videos")), video_names(settings.pop("redo"))
    fps = settings.pop("fps")
    return ExtractOptions(**encode, **given(fps=fps), videos=videos, redo=redo, **settings)


def export_mstcn(
    store: Annotated[Path, typer.Argument(help="Feature store folder (from `plstitch extract`).")],
    out: MstcnOutOpt,
    split_scheme: Annotated[
        str | None,
        typer.Option("--split-scheme", help="Export only this split scheme (default: all, as split1..N)."),
    ] = None,
    overwrite: OverwriteMstcnOpt = False,
) -> None:
    """Write a feature store in MS-TCN/ASFormer layout: features/, groundTruth/, mapping.txt, splits/.

    The folder is written beside --out and renamed onto it; plstitch_mstcn.json records its files, the
    only ones --overwrite replaces.
    """
    from plstitch_eval.export_mstcn import export_mstcn as run_export

    result = run_export(store, out, split_scheme=split_scheme, overwrite=overwrite)
    typer.echo(json.dumps(result.to_dict(), indent=2))


def register(app: typer.Typer) -> None:
    """Add this module's commands to the top-level app."""
    app.command("datasets")(datasets)
    app.command("extract")(extract)
    app.command("export-mstcn")(export_mstcn)
