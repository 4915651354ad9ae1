"""Options several commands share, declared once as typed aliases, and `given()` for "not given" defaults.

Why: an option's name, flags and help live in one place; a setting left unset (None) is dropped by `given`,
so the config dataclass's own default wins (change `KnnConfig.temperature` and every command follows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

FeaturesOpt = Annotated[
    Path, typer.Option("--features", "-f", help="Feature store folder (plstitch extract).")
]
JsonOpt = Annotated[
    Path | None,
    typer.Option(
        "--json",
        help="Write the results JSON to this file (atomically); - prints it on stdout.",
        dir_okay=False,
    ),
]
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
SaveProbeOpt = Annotated[
    Path | None,
    typer.Option(
        "--save",
        help="Save the trained head as a probe folder (probe.json + probe.safetensors; docs/probes.md).",
        file_okay=False,
    ),
]
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
KnnKOpt = Annotated[int | None, typer.Option("--k", help="k-NN neighbours (default 20).")]
TemperatureOpt = Annotated[
    float | None, typer.Option("--temperature", help="k-NN T in exp(sim / T) (default 0.07).")
]
WeightingOpt = Annotated[
    str | None,
    typer.Option("--weighting", help="k-NN weighting: exp (DINO, default), similarity or uniform."),
]
LrGridOpt = Annotated[
    list[float] | None, typer.Option("--lr", help="Linear-probe learning rates of the grid (repeat).")
]
WdGridOpt = Annotated[
    list[float] | None, typer.Option("--wd", help="Linear-probe weight decays of the grid (repeat).")
]
OptimizerOpt = Annotated[
    str | None, typer.Option("--optimizer", help="Linear probe: sgd (momentum 0.9, default) or adamw.")
]
SelectMetricOpt = Annotated[
    str | None,
    typer.Option("--select-metric", help="Linear-probe validation metric: accuracy (default) or macro_f1."),
]
CausalOpt = Annotated[bool, typer.Option("--causal", help="temporal: causal convolutions (online).")]

# loading an encoder (extract, benchmark, predict): None = load_encoder's own default
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Registry name, hf-hub:ORG/NAME, folder or checkpoint file."),
]
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

# encoding frames (extract, benchmark, predict): None = ExtractOptions' default
EncodeBatchOpt = Annotated[
    int | None, typer.Option("--batch-size", "-b", help="Frames per forward (default 64).")
]
EncodeDeviceOpt = Annotated[str | None, typer.Option("--device", help="auto (default), cpu, cuda or cuda:N.")]
PrecisionOpt = Annotated[
    str | None,
    typer.Option("--precision", help="auto (default: bf16 on CUDA, fp32 on CPU), fp32, bf16 or fp16."),
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
        help="Where torchcodec decodes: auto (the model's device: NVDEC on CUDA), cpu, cuda or cuda:N; "
        "pyav decodes on the CPU.",
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
