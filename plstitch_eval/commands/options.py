"""Options several commands share, declared once as typed aliases, and `given()` for "not given" defaults.

Why: an option's name, flags and help live in one place; a setting left unset (None) is dropped by `given`,
so the config dataclass's own default wins (change `KnnConfig.temperature` and every command follows).
Where commands' help differs (`--out`, `--split`), an alias factory (`out_opt(help)`) keeps the flag in one
place; help texts read defaults with `default_of`; `encode_settings` maps the encode group (extract, predict,
benchmark) onto `EncodeOptions`.
"""

from __future__ import annotations

import typing
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from plstitch_eval.encode_options import EncodeOptions
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.utils.outputs import (
    EITHER,
    FILE,
    FOLDER,
    OWNED_FOLDER,
    REPLACED_FOLDER,
    check_output_path,
)


def default_of(config: type, name: str) -> Any:
    """The default of dataclass `config`'s field `name`, for help texts: they follow the dataclass."""
    for field in fields(config):
        if field.name == name and field.default is not MISSING:
            return field.default
        if field.name == name and field.default_factory is not MISSING:
            return field.default_factory()
    raise KeyError(f"{config.__name__} has no field {name!r} with a default")


def choices_help(choices: dict[str, str], default: Any) -> str:
    """`a (note, default), b or c`: each choice with its note, the dataclass's `default` marked."""
    shown = []
    for name, note in choices.items():
        marks = [mark for mark in (note, "default" if name == default else "") if mark]
        shown.append(f"{name} ({', '.join(marks)})" if marks else name)
    return f"{', '.join(shown[:-1])} or {shown[-1]}" if len(shown) > 1 else shown[0]


def _option(kind: Any, *flags: str, help: str, **settings: Any) -> Any:
    """A typed alias `Annotated[kind, typer.Option(*flags, ...)]`, for the factories below."""
    return Annotated[kind, typer.Option(*flags, help=help, **settings)]


# the common flags: a factory where a command's meaning differs, an alias where they agree
DATASET_HELP = "Dataset adapter (see `plstitch datasets`)."
ROOT_HELP = "Dataset folder (not needed for synthetic)."
DEVICE_CHOICES = "auto, cpu or cuda[:N]"


def checked_output(kind: str = FOLDER, *, path: bool = False) -> Any:
    """A Typer callback refusing, in one line as the options are parsed (before any work starts), an output
    path that cannot be written (`utils.outputs.check_output_path` with the option's own flag); `path`: the
    option reads its text as it was typed (`output_opt`) and the callback makes it a Path. The callback
    carries `output_kind`, for the tests that walk every command's outputs."""

    def callback(param: typer.CallbackParam, value: Any) -> Any:
        if value is None:
            return None
        check_output_path(value, param.opts[0] if param.opts else "--out", kind)
        return Path(value) if path else value

    callback.output_kind = kind  # type: ignore[attr-defined]
    return callback


OUTPUT_METAVARS = {FILE: "<file>", REPLACED_FOLDER: "<dir>"}  # as Typer names a file or folder path


def output_opt(kind: Any, *flags: str, help: str, target: str = FOLDER, **settings: Any) -> Any:
    """An output option: its path checked as it is parsed (`checked_output(target)`), a Path option taking
    the text as typed (Typer's own path type makes `""` the current folder and answers `.` for a file in a
    usage box; the check says both in one line)."""
    if kind is Path or Path in typing.get_args(kind):
        settings = {"parser": str, "metavar": OUTPUT_METAVARS.get(target, "<path>"), **settings}
        return _option(kind, *flags, help=help, callback=checked_output(target, path=True), **settings)
    return _option(kind, *flags, help=help, callback=checked_output(target), **settings)


def out_opt(
    help: str,
    *,
    kind: Any = Path,
    short: bool = True,
    replaced: bool = False,
    file_or_folder: bool = False,
    owned: bool = False,
    file: bool = False,
) -> Any:
    """`--out` (`-o`) with the command's own help: what a command writes there differs per command;
    `replaced`: the folder is written beside its path and renamed onto it (so `.` cannot be it);
    `file_or_folder`: a file or a folder, as the command decides; `owned`: a folder the command fills as
    its own, refused by the command when it holds a user's files (`OWNED_FOLDER`); `file`: a file. Without
    these, a folder the command adds its named files to. Checked as it is parsed (`checked_output`)."""
    chosen = ((file, FILE), (file_or_folder, EITHER), (replaced, REPLACED_FOLDER), (owned, OWNED_FOLDER))
    target = next((name for given, name in chosen if given), FOLDER)
    return output_opt(kind, "--out", *(["-o"] if short else []), help=help, target=target)


def json_opt(help: str, *, kind: Any = Path | None) -> Any:
    """`--json FILE` (`-` prints it on stdout) with the command's own help; a file, checked as it is
    parsed (`checked_output`)."""
    return output_opt(kind, "--json", help=help, target=FILE)


def dataset_opt(help: str = DATASET_HELP, *, kind: Any = str, short: bool = True) -> Any:
    """`--dataset` (`-d`): a dataset adapter's name; `kind` str | None where it is optional."""
    return _option(kind, "--dataset", *(["-d"] if short else []), help=help)


def root_opt(help: str = ROOT_HELP, *, kind: Any = Path | None) -> Any:
    """`--root`: the dataset's folder (or, with a command's own help, a folder of videos)."""
    return _option(kind, "--root", help=help)


def split_opt(help: str, *, kind: Any = str | None) -> Any:
    """`--split` with the command's own help (only this split, or the split a recorded result used)."""
    return _option(kind, "--split", help=help)


def device_opt(default: str | None = None, *, kind: Any = str, choices: str = DEVICE_CHOICES) -> Any:
    """`--device` with the one help text; `default` names the default where the option itself is None."""
    told = f" (default {default})" if default is not None else ""
    return _option(kind, "--device", help=f"{choices}{told}.")


def protocol_set_opt(metavar: str, what: str, example: str, precedence: str) -> Any:
    """`--set` items of protocol settings (`protocols.settings.parse_set_items`), for benchmark and cv."""
    return _option(
        list[str] | None,
        "--set",
        metavar=metavar,
        help=f"{what}, repeatable (e.g. {example}; VALUE read as JSON when it parses); `plstitch protocols` "
        f"lists each protocol's fields. {precedence}",
    )


DatasetOpt = dataset_opt()
BenchmarkSetOpt = protocol_set_opt(
    "PROTOCOL.FIELD=VALUE", "Any protocol's setting", "knn.k=10", "Over --config's; the flags below win."
)
CvSetOpt = protocol_set_opt(
    "FIELD=VALUE", "Any setting of the protocol's config", "k=10", "Over --config's; the flags above win."
)
OptionalDatasetOpt = dataset_opt(kind=str | None)
RootOpt = root_opt()
SplitOpt = split_opt("Only this split (train, val, test).")
DatasetSchemeOpt = Annotated[
    str | None, typer.Option("--split-scheme", help="Scheme that --split refers to (default: the first).")
]

FeaturesOpt = Annotated[
    Path, typer.Option("--features", "-f", help="Feature store folder (plstitch extract).")
]
JsonOpt = json_opt("Write the results JSON to this file (atomically); - prints it on stdout.")
# device_opt() spelled out: tests/eval/commands/test_options.py finds its help in this file alone
DeviceOpt = Annotated[str, typer.Option("--device", help="auto, cpu or cuda[:N].")]
SchemeOpt = Annotated[
    str | None, typer.Option("--split-scheme", help="Split scheme in the manifest (default: the first).")
]
RelaxedOpt = Annotated[
    bool,
    typer.Option(
        "--relaxed",
        help="Also report the Cholec80/M2CAI16 challenge relaxed metrics (10 s boundary tolerance, known "
        "script bugs fixed; docs/metrics.md) in a `relaxed` block beside the strict metrics.",
    ),
]
ValFractionOpt = Annotated[
    float, typer.Option("--val-fraction", help="Training videos held out (by video) when no val split.")
]
SaveProbeOpt = output_opt(
    Path | None,
    "--save",
    help="Save the trained head as a probe folder (probe.json + probe.safetensors; docs/probes.md).",
    target=REPLACED_FOLDER,
)
OverwriteProbeOpt = Annotated[
    bool, typer.Option("--overwrite", help="Replace an existing --save probe folder.")
]
CropMarginOpt = Annotated[
    bool,
    typer.Option(
        "--crop-black-margin",
        help="Cut each video's black border (grey <= 15, found on its first 64 s) before the model's resize.",
    ),
]


# the k-NN and linear protocols (knn, linear, cv, benchmark): None = KnnConfig's / LinearConfig's default
KnnKOpt = Annotated[
    int | None, typer.Option("--k", help=f"k-NN neighbours (default {default_of(KnnConfig, 'k')}).")
]
TemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature", help=f"k-NN T in exp(sim / T) (default {default_of(KnnConfig, 'temperature')})."
    ),
]
WeightingOpt = Annotated[
    str | None,
    typer.Option(
        "--weighting",
        help="k-NN weighting: "
        + choices_help({"exp": "DINO", "similarity": "", "uniform": ""}, default_of(KnnConfig, "weighting"))
        + ".",
    ),
]
LrGridOpt = Annotated[
    list[float] | None, typer.Option("--lr", help="Linear-probe learning rates of the grid (repeat).")
]
WdGridOpt = Annotated[
    list[float] | None, typer.Option("--wd", help="Linear-probe weight decays of the grid (repeat).")
]
OptimizerOpt = Annotated[
    str | None,
    typer.Option(
        "--optimizer",
        help="Linear probe: "
        + choices_help({"sgd": "momentum 0.9", "adamw": ""}, default_of(LinearConfig, "optimizer"))
        + ".",
    ),
]
SelectMetricOpt = Annotated[
    str | None,
    typer.Option(
        "--select-metric",
        help="Linear-probe validation metric: "
        + choices_help({"accuracy": "", "macro_f1": ""}, default_of(LinearConfig, "select_metric"))
        + ".",
    ),
]
CausalOpt = Annotated[bool, typer.Option("--causal", help="temporal: causal convolutions (online).")]
# what a probe predicts (`plstitch tasks`): the task registry's names, and what a task's targets depend on
TaskOpt = Annotated[
    str,
    typer.Option(
        "--task",
        help="What the probe predicts: phases (default), tools, anticipation (minutes until each phase/tool "
        "next occurs), rsd (remaining duration) or a plugin's; `plstitch tasks` lists them.",
    ),
]
HorizonOpt = Annotated[
    float,
    typer.Option(
        "--horizon",
        help="--task anticipation: the horizon in minutes (default 3; the field reports 2, 3 and 5).",
    ),
]
AnticipateOpt = Annotated[
    str,
    typer.Option(
        "--anticipate",
        help="--task anticipation: phases, tools or phases,tools (default auto: phases, and tools where the "
        "store has tool labels).",
    ),
]
ElapsedOpt = Annotated[
    bool,
    typer.Option(
        "--elapsed", help="Regression tasks: the elapsed minutes are one more input (RSDNet); linear only."
    ),
]
# label efficiency (knn, linear, temporal, cv): `protocols.fractions.fraction_config` builds the TrainFraction
TrainFractionOpt = Annotated[
    float | None,
    typer.Option(
        "--train-fraction",
        help="Train on this share of the training videos (0 < F <= 1, whole videos, nested across F for a "
        "seed); val and test unchanged; 1 = all, as without it.",
    ),
]
FractionSeedsOpt = Annotated[
    str | None,
    typer.Option(
        "--fraction-seeds",
        help="Subsets drawn per fraction below 1: a count (3 = seeds 0,1,2, the default) or seeds (0,4,9); "
        "mean ± std over them.",
    ),
]

# loading an encoder (extract, benchmark, predict): None = load_encoder's own default
RevisionOpt = Annotated[str | None, typer.Option("--revision", help="Hub revision (branch, tag or commit).")]
TrustPickleOpt = Annotated[
    bool, typer.Option("--trust-pickle", help="Allow loading pickle checkpoints (runs their code).")
]
WhichOpt = Annotated[
    str | None,
    typer.Option(
        "--which", help="Network of a training checkpoint: teacher (default, as published) or student."
    ),
]
TransformOpt = Annotated[
    str | None,
    typer.Option(
        "--transform",
        help="Override the model's eval transform: whole-frame (resize the frame to the input size, "
        "as PL-Stitch's authors) or center-crop (shorter side, centre crop: DINO evaluation).",
    ),
]

# encoding frames (extract, benchmark, predict): None = EncodeOptions' default (ExtractOptions, PredictOptions
# inherit it); `encode_settings` turns the flags given into the options' keyword arguments
EncodeBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--batch-size", "-b", help=f"Frames per forward (default {default_of(EncodeOptions, 'batch_size')})."
    ),
]
EncodeDeviceOpt = device_opt(default_of(EncodeOptions, "device"), kind=str | None)
PrecisionOpt = Annotated[
    str | None,
    typer.Option(
        "--precision",
        help=f"{default_of(EncodeOptions, 'precision')} (default: bf16 on CUDA, fp32 on CPU), fp32, bf16 "
        "or fp16.",
    ),
]
NumWorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--num-workers", "-j", help="Decoding workers (default: one per core on a GPU, min(4, cores) on CPU)."
    ),
]
FpsOpt = Annotated[
    float | None, typer.Option("--fps", help="Sampling rate in frames/s (default: the dataset's eval fps).")
]
ResizeOnDecodeOpt = Annotated[
    bool,
    typer.Option(
        "--resize-on-decode",
        help="Let FFmpeg/PIL resize while decoding (faster, bilinear; pixels differ from the model's).",
    ),
]

# the video decoder (help texts hold no square brackets: the app renders help as rich markup)
DECODER_HELP = (
    "Video decoder: pyav (default), torchcodec (CPU, or NVDEC on CUDA; needs the torchcodec extra and a "
    "system FFmpeg) or auto (torchcodec when it loads and opens the first video, else pyav). Frame folders "
    "are read as images whatever the decoder."
)
DecoderOpt = Annotated[str | None, typer.Option("--decoder", help=DECODER_HELP)]
DecodeDeviceOpt = Annotated[
    str | None,
    typer.Option(
        "--decode-device",
        help="Where video is decoded: auto (NVDEC on the model's CUDA device when the decoder can use it "
        "there - pyav needs a PyAV wheel with NVDEC and NVDEC decoding the first video - else the CPU), cpu, "
        "cuda or cuda:N (NVDEC).",
    ),
]
ProbeDecoderOpt = Annotated[
    str | None,
    typer.Option("--decoder", help=f"{DECODER_HELP} Default: the decoder of the probe's features."),
]
TrainDecoderOpt = Annotated[
    str | None,
    typer.Option(
        "--decoder",
        help="Video decoder of the frame caches, on the CPU: pyav (the presets'), torchcodec (needs the "
        "torchcodec extra and a system FFmpeg) or auto.",
    ),
]


def given(**values: Any) -> dict[str, Any]:
    """The settings that were given: None (not given) dropped, so the config's default applies."""
    return {name: value for name, value in values.items() if value is not None}


def encode_settings(
    *,
    batch_size: int | None = None,
    num_workers: int | None = None,
    device: str | None = None,
    precision: str | None = None,
    decoder: str | None = None,
    decode_device: str | None = None,
) -> dict[str, Any]:
    """The encode-group flags given, as keyword arguments of `EncodeOptions` (and `ExtractOptions`,
    `PredictOptions`): one mapping for extract, predict and benchmark, so equal flags encode alike."""
    return given(
        batch_size=batch_size,
        num_workers=num_workers,
        device=device,
        precision=precision,
        decoder=decoder,
        decode_device=decode_device,
    )
