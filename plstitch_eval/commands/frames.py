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
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.errors import ConfigError, DataError
from plstitch_eval.utils.io import write_json_output
from plstitch_train.videos import TrainingVideo, select_training_videos

LmdbOutOpt = out_opt("LMDB folder to write (resumes <out>.partial).")
FramesDatasetOpt = dataset_opt("Dataset adapter name.", kind=str | None)
FramesRootOpt = root_opt("Dataset folder.")
FramesSplitOpt = split_opt("Dataset split (default: every video).")


def write_lmdb(
    ctx: typer.Context,
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
    image_format: Annotated[
        str | None,
        typer.Option(
            "--image-format",
            help="Frames as jpeg (lossy, at --quality) or png (lossless: the decoder's pixels exactly). "
            "Default: jpeg; png with --eval-frames.",
        ),
    ] = None,
    quality: Annotated[
        int | None, typer.Option("--quality", help="JPEG quality 1-100 (default 90); not with png.")
    ] = None,
    standard_colour: Annotated[
        bool,
        typer.Option(
            "--standard-colour",
            help="Store frames in standard RGB order instead of the authors' cv2 order (red/blue swapped).",
        ),
    ] = False,
    decoder: TrainDecoderOpt = None,
    eval_frames: Annotated[
        bool,
        typer.Option(
            "--eval-frames",
            help="Write --dataset's frames as `plstitch extract` samples them (its evaluation fps, decoded "
            "size), for `plstitch extract --frames`; lossless PNG unless --image-format jpeg.",
        ),
    ] = False,
) -> None:
    """Write frames as an LMDB: keys <video>_<t>, JPEG or PNG values (what `plstitch train --data` reads),
    each video's frame times beside them (what `plstitch extract --frames` reads).

    Resumable: rerun the same command after an interruption. A finished LMDB is never overwritten.
    """
    from plstitch_eval.data.decoders import check_decoder_options, resolve_decoding
    from plstitch_train.frames_lmdb import lmdb_summary, write_frames_lmdb

    if decoder is not None:
        check_decoder_options(decoder)
    image_format = _image_format(image_format, quality, eval_frames)
    if eval_frames:
        explicit = {name for name in ("fps", "size") if _given(ctx, name)}
        videos, source, fps = _eval_videos(data, dataset, root, split, fps if "fps" in explicit else None)
        if "size" in explicit and size:
            raise ConfigError(
                f"--eval-frames keeps each video's decoded size (extraction resizes later); --size {size} "
                "contradicts it: leave out --size."
            )
        size = 0
    else:
        videos, source = select_training_videos(data, dataset, root, split, folder_fps=fps)
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
        image_format=image_format,
    )
    summary = lmdb_summary(path)
    if eval_frames and not summary["frame_times"]:
        raise DataError(
            f"{path}: finished before plstitch recorded frame times, so `plstitch extract --frames` cannot "
            "read it; remove it or choose another --out."
        )
    write_json_output("-", summary)


def _image_format(image_format: str | None, quality: int | None, eval_frames: bool) -> str:
    """The values' format: `--image-format`, else PNG for `--eval-frames` caches (lossless, so features from
    the cache are the video's; docs/frame-cache.md) and JPEG for training frames. `--quality` is JPEG's: with
    PNG, given or by default, it is refused in one line naming the fix."""
    from plstitch_eval.data.frames_lmdb import EVAL_FRAMES_FORMAT, IMAGE_FORMATS, JPEG

    if image_format is not None and image_format not in IMAGE_FORMATS:
        raise ConfigError(f"--image-format must be {' or '.join(IMAGE_FORMATS)}, got {image_format!r}.")
    chosen = image_format or (EVAL_FRAMES_FORMAT if eval_frames else JPEG)
    if quality is not None and chosen != JPEG:
        why = "" if image_format else " (the default of --eval-frames caches, lossless)"
        raise ConfigError(
            f"--quality {quality} sets JPEG quality, but the frames are {chosen.upper()}{why}: leave out "
            f"--quality, or add --image-format jpeg for JPEG frames at quality {quality}."
        )
    return chosen


def _given(ctx: typer.Context, name: str) -> bool:
    """Whether option `name` was given (command line or environment), not left at its default. By the
    source's name: Typer may carry its own copy of click, whose ParameterSource is another enum."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


def _eval_videos(
    data: Path | None, dataset: str | None, root: Path | None, split: str | None, fps: float | None
) -> tuple[list[TrainingVideo], str, float]:
    """A dataset's videos as extraction decodes them (records' names, sources, frame-folder rates), where they
    came from, and the adapter's evaluation fps (an explicit `fps` must equal it)."""
    if dataset is None or data is not None:
        raise ConfigError(
            "--eval-frames writes a dataset's evaluation frames: give --dataset NAME (and --root)."
        )
    adapter = get_dataset(dataset, root=root)
    eval_fps = float(adapter.eval_fps)
    if fps is not None and abs(fps - eval_fps) > 1e-9:
        raise ConfigError(
            f"--eval-frames writes {dataset}'s frames at its evaluation rate, {eval_fps:g} fps; "
            f"--fps {fps:g} contradicts it: leave out --fps (for `plstitch extract --fps {fps:g}`, write "
            f"--fps {fps:g} --size 0 --image-format png without --eval-frames)."
        )
    records = adapter.videos(split)
    if not records:
        raise DataError(f"Dataset {dataset!r} (root {root}) has no videos in split {split!r}.")
    root_text = None if root is None else str(Path(root).resolve())
    videos = [TrainingVideo(r.name, Path(r.source), r.folder_fps) for r in records]
    return videos, f"{dataset}:{root_text}:{split}", eval_fps


def register(app: typer.Typer) -> None:
    app.command("write-lmdb")(write_lmdb)
