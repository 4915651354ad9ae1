"""CLI command `write-lmdb`: decode videos once into a frames LMDB in the authors' layout; print JSON.

Training frames are JPEGs (quality 90 by default). `--eval-frames` writes a dataset's frames as `plstitch
extract` samples them (the adapter's evaluation rate, decoded size, its video names and frame folders'
rates), for `plstitch extract --frames`, as lossless PNGs by default (`--image-format jpeg` for JPEGs).

Library imports sit inside the commands, for start-up time (`plstitch_eval/commands/__init__.py`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import TrainDecoderOpt, dataset_opt, out_opt, root_opt, split_opt
from plstitch_eval.utils.io import write_json_output

LmdbOutOpt = out_opt("LMDB folder to write (resumes <out>.partial).", replaced=True)
FramesDatasetOpt = dataset_opt("Dataset adapter name.", kind=str | None)
FramesRootOpt = root_opt("Dataset folder.")
FramesSplitOpt = split_opt("Dataset split (default: every video).")
DataOpt = Annotated[Path | None, typer.Option("--data", help="Folder of videos or frame folders.")]
LmdbFpsOpt = Annotated[float, typer.Option("--fps", help="Frames per second kept (the authors': 1).")]
SizeOpt = Annotated[
    int,
    typer.Option("--size", min=0, help="Shorter side in pixels; 0 keeps each video's decoded size."),
]
ImageFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--image-format",
        help="Frames as jpeg (lossy, at --quality) or png (lossless: the decoder's pixels exactly). "
        "Default: jpeg; png with --eval-frames.",
    ),
]
QualityOpt = Annotated[
    int | None, typer.Option("--quality", help="JPEG quality 1-100 (default 90); not with png.")
]
StandardColourOpt = Annotated[
    bool,
    typer.Option(
        "--standard-colour",
        help="Store frames in standard RGB order instead of the authors' cv2 order (red/blue swapped).",
    ),
]
EvalFramesOpt = Annotated[
    bool,
    typer.Option(
        "--eval-frames",
        help="Write --dataset's frames as `plstitch extract` samples them (its evaluation fps, decoded "
        "size), for `plstitch extract --frames`; lossless PNG unless --image-format jpeg.",
    ),
]


def write_lmdb(
    ctx: typer.Context,
    out: LmdbOutOpt,
    data: DataOpt = None,
    dataset: FramesDatasetOpt = None,
    root: FramesRootOpt = None,
    split: FramesSplitOpt = None,
    fps: LmdbFpsOpt = 1.0,
    size: SizeOpt = 256,
    image_format: ImageFormatOpt = None,
    quality: QualityOpt = None,
    standard_colour: StandardColourOpt = False,
    decoder: TrainDecoderOpt = None,
    eval_frames: EvalFramesOpt = False,
) -> None:
    """Write frames as an LMDB: keys <video>_<t>, JPEG or PNG values (what `plstitch train --data` reads),
    each video's frame times beside them (what `plstitch extract --frames` reads).

    Resumable: rerun the same command after an interruption. A finished LMDB is never overwritten.
    """
    from plstitch_train.frames_request import FramesRequest, write_lmdb_session

    request = FramesRequest(
        data=data,
        dataset=dataset,
        root=root,
        split=split,
        fps=fps if _given(ctx, "fps") else None,
        size=size if _given(ctx, "size") else None,
        image_format=image_format,
        quality=quality,
        standard_colour=standard_colour,
        decoder=decoder,
        eval_frames=eval_frames,
    )
    write_json_output("-", write_lmdb_session(request, out))


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option `name` was given (command line or environment), not left at its default. By the
    source's name: Typer may carry its own copy of click, whose ParameterSource is another enum."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def register(app: typer.Typer) -> None:
    app.command("write-lmdb")(write_lmdb)
