"""What a `plstitch write-lmdb` command line asks for (`FramesRequest`): training frames (JPEG at 1 fps,
256 px by default) or, with `eval_frames`, a dataset's frames as `plstitch extract` samples them (PNG by
default), its choices checked and resolved in one place, then written (`write_lmdb_session`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.decoders import check_decoder_options, resolve_decoding
from plstitch_eval.data.frames_lmdb import EVAL_FRAMES_FORMAT, IMAGE_FORMATS, JPEG
from plstitch_eval.errors import ConfigError, DataError
from plstitch_train.frames_lmdb import lmdb_summary, write_frames_lmdb
from plstitch_train.videos import TrainingVideo, select_training_videos

__all__ = [
    "DEFAULT_FPS",
    "DEFAULT_SIZE",
    "FramesRequest",
    "eval_videos",
    "image_format",
    "write_lmdb_session",
]

DEFAULT_FPS = 1.0  # training frames: the authors' rate
DEFAULT_SIZE = 256  # training frames: the shorter side in pixels


@dataclass(frozen=True)
class FramesRequest:
    """The frames to write: a `data` folder or a `dataset` (at `root`, one `split`); `fps` and `size` None
    when not given (training frames: 1 fps, 256 px; eval frames: the dataset's evaluation fps, decoded
    size); `image_format` None: PNG for eval frames, JPEG otherwise; `quality` JPEG's (default 90)."""

    data: Path | None = None
    dataset: str | None = None
    root: Path | None = None
    split: str | None = None
    fps: float | None = None
    size: int | None = None
    image_format: str | None = None
    quality: int | None = None
    standard_colour: bool = False
    decoder: str | None = None
    eval_frames: bool = False

    def check(self) -> tuple[list[TrainingVideo], str, float, int, str]:
        """(videos, where they came from, fps, shorter side (0: decoded size), image format), every choice
        checked: a decoder that cannot load, an image format, --quality without JPEG, and with eval frames
        no --data, an --fps other than the dataset's and a --size other than 0 - each one line naming the
        fix."""
        if self.decoder is not None:
            check_decoder_options(self.decoder)
        chosen = image_format(self.image_format, self.quality, self.eval_frames)
        if not self.eval_frames:
            fps = DEFAULT_FPS if self.fps is None else self.fps
            videos, source = select_training_videos(
                self.data, self.dataset, self.root, self.split, folder_fps=fps
            )
            return videos, source, fps, DEFAULT_SIZE if self.size is None else self.size, chosen
        videos, source, fps = eval_videos(self.data, self.dataset, self.root, self.split, self.fps)
        if self.size:
            raise ConfigError(
                "--eval-frames keeps each video's decoded size (extraction resizes later); "
                f"--size {self.size} contradicts it: leave out --size."
            )
        return videos, source, fps, 0, chosen


def write_lmdb_session(request: FramesRequest, out: Path) -> dict[str, Any]:
    """Write `request`'s frames into the LMDB `out` (resuming `<out>.partial`); its summary. An eval-frames
    LMDB finished before frame times were recorded is refused (`plstitch extract --frames` needs them)."""
    videos, source, fps, size, chosen = request.check()
    sample = next((v.source for v in videos if Path(v.source).is_file()), None)
    decoding = resolve_decoding(request.decoder or "pyav", "cpu", "cpu", sample)
    path = write_frames_lmdb(
        videos,
        out,
        fps,
        size or None,
        request.quality,
        swap_rb=not request.standard_colour,
        source=source,
        decoding=decoding,
        image_format=chosen,
    )
    summary = lmdb_summary(path)
    if request.eval_frames and not summary["frame_times"]:
        raise DataError(
            f"{path}: finished before plstitch recorded frame times, so `plstitch extract --frames` cannot "
            "read it; remove it or choose another --out."
        )
    return summary


def image_format(chosen: str | None, quality: int | None, eval_frames: bool) -> str:
    """The values' format: `--image-format`, else PNG for `--eval-frames` caches (lossless, so features from
    the cache are the video's; docs/frame-cache.md) and JPEG for training frames. `--quality` is JPEG's: with
    PNG, given or by default, it is refused in one line naming the fix."""
    if chosen is not None and chosen not in IMAGE_FORMATS:
        raise ConfigError(f"--image-format must be {' or '.join(IMAGE_FORMATS)}, got {chosen!r}.")
    resolved = chosen or (EVAL_FRAMES_FORMAT if eval_frames else JPEG)
    if quality is not None and resolved != JPEG:
        why = "" if chosen else " (the default of --eval-frames caches, lossless)"
        raise ConfigError(
            f"--quality {quality} sets JPEG quality, but the frames are {resolved.upper()}{why}: leave out "
            f"--quality, or add --image-format jpeg for JPEG frames at quality {quality}."
        )
    return resolved


def eval_videos(
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
