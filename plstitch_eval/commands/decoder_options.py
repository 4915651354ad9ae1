"""The video-decoder options shared by `extract`, `benchmark`, `predict` and `train`, declared once (the
same typed-alias form as `commands/options.py`).

Help texts hold no square brackets: the app renders help as rich markup.
"""

from __future__ import annotations

from typing import Annotated

import typer

DECODER_HELP = (
    "Video decoder: pyav (default), torchcodec (CPU, or NVDEC on CUDA; needs the torchcodec extra and a "
    "system FFmpeg) or auto (torchcodec when it loads and opens the first video, else pyav). Frame folders "
    "are read as images whatever the decoder."
)
DecoderOpt = Annotated[str, typer.Option("--decoder", help=DECODER_HELP)]
DecodeDeviceOpt = Annotated[
    str,
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
