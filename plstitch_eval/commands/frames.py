"""CLI command `write-lmdb`: decode videos once into a JPEG frames LMDB in the authors' layout; print JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plstitch_eval.commands.options import TrainDecoderOpt, dataset_opt, out_opt, root_opt, split_opt
from plstitch_eval.utils.io import write_json_output

LmdbOutOpt = out_opt("LMDB folder to write (resumes <out>.partial).")
FramesDatasetOpt = dataset_opt("Dataset adapter name.", kind=str | None)
FramesRootOpt = root_opt("Dataset folder.")
FramesSplitOpt = split_opt("Dataset split (default: every video).")


def write_lmdb(
    out: LmdbOutOpt,
    data: Annotated[Path | None, typer.Option("--data", help="Folder of videos or frame folders.")] = None,
    dataset: FramesDatasetOpt = None,
    root: FramesRootOpt = None,
    split: FramesSplitOpt = None,
    fps: Annotated[float, typer.Option("--fps", help="Frames per second kept (the authors': 1).")] = 1.0,
    size: Annotated[
        int,
        typer.Option("--size", min=0, help="Shorter side in pixels; 0 keeps each video's decoded size."),
    ] = 256,
    quality: Annotated[int, typer.Option("--quality", help="JPEG quality 1-100.")] = 90,
    standard_colour: Annotated[
        bool,
        typer.Option(
            "--standard-colour",
            help="Store JPEGs in standard RGB order instead of the authors' cv2 order (red/blue swapped).",
        ),
    ] = False,
    decoder: TrainDecoderOpt = None,
) -> None:
    """Write training frames as an LMDB: keys <video>_<t>, JPEG values (what `plstitch train --data` reads).

    Resumable: rerun the same command after an interruption. A finished LMDB is never overwritten.
    """
    from plstitch_eval.data.decoders import check_decoder_options, resolve_decoding
    from plstitch_train.data import select_videos
    from plstitch_train.frames_lmdb import lmdb_summary, write_frames_lmdb

    if decoder is not None:
        check_decoder_options(decoder)
    videos, source = select_videos(data, dataset, root, split, folder_fps=fps)
    sample = next((v.source for v in videos if Path(v.source).is_file()), None)
    decoding = resolve_decoding(decoder or "pyav", "cpu", "cpu", sample)
    path = write_frames_lmdb(
        videos,
        out,
        fps,
        size or None,
        quality,
        swap_rb=not standard_colour,
        source=source,
        decoding=decoding,
    )
    write_json_output("-", lmdb_summary(path))


def register(app: typer.Typer) -> None:
    app.command("write-lmdb")(write_lmdb)
