"""Training frames in an LMDB of encoded images, in the layout the authors' trainer reads (LEMON's form).

Keys are `<video>_<t>` (t = frame index at the store's frame rate, decimal, no padding), values are JPEG or
PNG bytes. The authors' writers hand an RGB array to `cv2.imencode` and their reader takes what
`cv2.imdecode` returns as RGB, so the bytes hold the frame with red and blue swapped for a standard decoder;
`swap_rb=True` (the default, and what an LMDB without our sidecar is assumed to be) keeps that convention,
so our stores train in their code and theirs in ours. Our writer also leaves `plstitch_frames.json` (frame
rate, size, image format and quality, colour order, finished videos) and `plstitch_frame_times.jsonl` (each
video's sample times) in the LMDB folder - files the authors' reader ignores; a key of our own would break
their key parsing. The format (layout, sidecars, environments, JPEG/PNG coding) lives in
`plstitch_eval.data.frames_lmdb`, where evaluation reads it too; its names are re-exported here.

`LmdbFrameStore` has `FrameStore`'s interface (`names`, `lengths`, `fps`, `frames`). Each process opens its
own read-only environment on first use and closes it before any fork (LMDB's rule across fork: DataLoader
workers and DDP ranks never use the parent's handle). `write_frames_lmdb` decodes videos once into such an
LMDB, resumably: videos are committed one by one into `<out>.partial/`, renamed to `<out>` when all are in.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from plstitch_eval.data.decoders import PYAV, read_frames
from plstitch_eval.data.frames_lmdb import (
    _READERS,  # noqa: F401  (re-exported: the formats' home is plstitch_eval.data.frames_lmdb)
    AUTHORS_FPS,
    IMAGE_FORMATS,
    JPEG,
    LAYOUT_FORMAT,
    LMDB_DATA_FILE,
    MAP_SIZE,
    SIDECAR_NAME,
    TIMES_NAME,
    LmdbLayout,
    _close_readers,  # noqa: F401
    _lmdb_folder,
    _open_env,
    _reader,
    _write_layout,
    append_frame_times,
    decode_frame,
    encode_frame,
    is_frames_lmdb,
    read_frame_times,
    read_layout,
    rewrite_frame_times,
    scan_keys,
)
from plstitch_eval.errors import ConfigError, DataError
from plstitch_eval.utils.console import console, logger, progress_bar

if TYPE_CHECKING:
    from plstitch_eval.data.decoders import Decoding
    from plstitch_eval.data.video import DecodedFrame
    from plstitch_train.videos import TrainingVideo

COMMIT_EVERY = 512  # frames per write transaction (bounds the writer's memory on long videos)
JPEG_QUALITY = 90  # JPEG quality when none is given (the training default, `FramesConfig.jpeg_quality`)


class LmdbFrameStore:
    """Training videos read from a frames LMDB: video i's position p is key `<names[i]>_<indices[i][p]>`.

    Positions skip missing indices (the authors' clip sampler walks the sorted indices the same way).
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        names: list[str],
        indices: list[np.ndarray],
        fps: float,
        swap_rb: bool = True,
        reverse_time: bool = False,
    ) -> None:
        self.folder = _lmdb_folder(folder)
        self.names, self.fps, self.swap_rb, self.reverse_time = names, fps, swap_rb, reverse_time
        self._indices = indices
        self._prefixes = [name.encode("utf-8") + b"_" for name in names]

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        fps: float | None = None,
        min_frames: int = 1,
        reverse_time: bool = False,
    ) -> LmdbFrameStore:
        """Index an LMDB's keys; `fps` (the training setting) must equal the store's frame rate."""
        folder = _lmdb_folder(path)
        if not is_frames_lmdb(folder):
            raise DataError(f"{path}: not an LMDB (no {LMDB_DATA_FILE}); write one with plstitch write-lmdb.")
        layout, _ = read_layout(folder)
        if fps is not None and abs(fps - layout.fps) > 1e-9:
            raise ConfigError(
                f"{folder}: its keys count frames at {layout.fps:g} fps, but training asks for {fps:g} fps; "
                f"pass --fps {layout.fps:g} (or write an LMDB at {fps:g} fps)."
            )
        frames = scan_keys(_reader(folder))
        names, indices = [], []
        for name, ts in frames.items():
            if len(ts) < min_frames:
                logger.warning("Skipping %s: %d frames < clip length %d.", name, len(ts), min_frames)
                continue
            names.append(name)
            indices.append(np.asarray(ts, dtype=np.int64))
        if not names:
            raise DataError(
                f"No training video has at least {min_frames} frames at {layout.fps} fps in {folder} "
                "(keys <video>_<t>); raise --fps or lower --clip-len."
            )
        logger.info("LMDB %s: %d videos, %d frames", folder, len(names), sum(len(i) for i in indices))
        return cls(folder, names, indices, layout.fps, layout.swap_rb, reverse_time)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def lengths(self) -> list[int]:
        """Frames per video."""
        return [len(i) for i in self._indices]

    def keys(self, video: int, indices: list[int] | np.ndarray) -> list[bytes]:
        """The LMDB keys of positions `indices` of `video` (time-reversed when `reverse_time`)."""
        ts = self._indices[video]
        idx = np.asarray(indices, dtype=np.int64)
        if self.reverse_time:
            idx = len(ts) - 1 - idx
        return [self._prefixes[video] + str(int(t)).encode("ascii") for t in ts[idx]]

    def frames(self, video: int, indices: list[int] | np.ndarray) -> np.ndarray:
        """uint8 [n, H, W, 3] RGB frames at positions `indices` of `video`."""
        keys = self.keys(video, indices)
        with _reader(self.folder).begin(buffers=False) as txn:
            values = [txn.get(key) for key in keys]
        images = []
        for key, value in zip(keys, values, strict=True):
            if value is None:
                raise DataError(f"{self.folder}: key {key.decode(errors='replace')} vanished while training.")
            images.append(decode_frame(value, self.swap_rb))
        shapes = {image.shape for image in images}
        if len(shapes) > 1:
            raise DataError(
                f"{self.folder}: frames of {self.names[video]} differ in size {sorted(shapes)}; "
                "every frame of a video must have one size (rewrite it with `plstitch write-lmdb --size N`)."
            )
        return np.stack(images)


class DecodeProgress:
    """Progress of decoding videos: a rich bar on a terminal; else (a log file, CI) a log line after the first
    video and then at most every `every_s` seconds, so a long decode is never silent.
    """

    def __init__(self, label: str, total: int, done: int = 0, every_s: float = 10.0) -> None:
        self.label, self.total, self.done, self.every_s = label, total, done, every_s
        self.interactive = console.is_terminal
        self.bar = progress_bar(disable=not self.interactive or done >= total)
        self.task = self.bar.add_task(label, total=total, completed=done)
        self.frames, self.started, self.logged = 0, time.perf_counter(), None

    def __enter__(self) -> DecodeProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def advance(self, frames: int) -> None:
        """One more video done, holding `frames` frames."""
        self.done, self.frames = self.done + 1, self.frames + frames
        self.bar.advance(self.task)
        now = time.perf_counter()
        if self.interactive or (self.logged is not None and now - self.logged < self.every_s):
            return
        self.logged = now
        logger.info(
            "%s: %d/%d videos decoded (%d frames, %.0f s)",
            self.label,
            self.done,
            self.total,
            self.frames,
            now - self.started,
        )


def write_frames_lmdb(
    videos: list[TrainingVideo],
    out: str | os.PathLike,
    fps: float,
    frame_size: int | None,
    quality: int | None = None,
    *,
    swap_rb: bool = True,
    source: str | None = None,
    decoding: Decoding | None = None,
    image_format: str = JPEG,
) -> Path:
    """Decode `videos` at `fps` (shorter side `frame_size`, by `decoding`: PyAV when None) into a frames
    LMDB at `out`, values JPEG at `quality` (None: JPEG_QUALITY) or, with `image_format="png"`, lossless PNG
    (no quality); resumable.

    Every video's sample times (`DecodedFrame.time`) are recorded beside the frames (`TIMES_NAME`), so an
    evaluation can read the frames in place of the video (`plstitch_eval.data.frames_lmdb.FrameCache`). A
    finished LMDB at `out` written with the same settings and videos is returned as it is; anything else at
    `out` is refused (nothing written is replaced). An interrupted write resumes in `<out>.partial`; videos it
    finished without recording their times (an older plstitch) are decoded again.
    """
    decoding = (decoding or PYAV).on_cpu()
    if image_format not in IMAGE_FORMATS:
        raise ConfigError(f"Frame image format must be {' or '.join(IMAGE_FORMATS)} (got {image_format!r}).")
    if image_format != JPEG and quality is not None:
        raise ConfigError(f"{image_format.upper()} frames are lossless: no JPEG quality (got {quality}).")
    if image_format == JPEG:
        quality = JPEG_QUALITY if quality is None else quality
        if not 1 <= quality <= 100:
            raise ConfigError(f"JPEG quality must be in 1..100 (got {quality}).")
    out = Path(out)
    layout = LmdbLayout(float(fps), swap_rb, frame_size, quality, source, decoding.decoder, image_format)
    wanted = [video.name for video in videos]
    if len(set(wanted)) != len(wanted):
        raise DataError(f"Two videos share a name under {source}; LMDB keys <video>_<t> need unique names.")
    if out.exists():
        return _existing_store(out, layout, wanted)
    partial = out.with_name(out.name + ".partial")
    done: dict[str, int] = {}
    if partial.exists():
        old, recorded = read_layout(partial)
        if recorded is None or old != layout:
            raise DataError(
                f"{partial}: an unfinished LMDB written with other settings ({_diff(old, layout)}); "
                "resume with its settings or remove it."
            )
        done = _timed_videos(partial, recorded)
        logger.info("Resuming %s: %d of %d videos already written.", partial, len(done), len(videos))
    else:
        partial.mkdir(parents=True)
        _write_layout(partial, layout, done)
    env = _open_env(partial, write=True)
    logger.info(
        "preparing data: decoding %d videos at %g fps into %s (once; a rerun reuses it)",
        len(videos) - len(done),
        fps,
        out,
    )
    try:
        with DecodeProgress(f"LMDB {out.name}", len(videos), len(done)) as progress:
            for video in videos:
                if video.name in done:
                    continue
                frames = read_frames(
                    video.source, fps, frame_size, folder_fps=video.folder_fps, decoding=decoding
                )
                frame_times = _write_video(env, video, frames, fps, layout)
                env.sync(True)
                append_frame_times(partial, video.name, frame_times)  # before the sidecar names it finished
                done[video.name] = len(frame_times)
                _write_layout(partial, layout, done)
                progress.advance(done[video.name])
    finally:
        env.close()
    os.replace(partial, out)
    logger.info("Wrote %s: %d videos, %d frames.", out, len(done), sum(done.values()))
    return out


def _timed_videos(partial: Path, recorded: dict[str, int]) -> dict[str, int]:
    """The finished videos of an unfinished LMDB whose times are recorded, the times file cut to them (torn
    or stale lines dropped); the others are decoded again."""
    frame_times = read_frame_times(partial)
    done = {name: n for name, n in recorded.items() if len(frame_times.get(name, ())) == n}
    if len(done) < len(recorded):
        logger.info(
            "%s: %d finished videos have no recorded frame times (an older plstitch wrote them); "
            "decoding them again.",
            partial,
            len(recorded) - len(done),
        )
    rewrite_frame_times(partial, {name: frame_times[name] for name in done})
    return done


def _write_video(
    env: Any, video: TrainingVideo, frames: Iterable[DecodedFrame], fps: float, layout: LmdbLayout
) -> list[float]:
    """Put one video's decoded `frames` under `<name>_<t>` (commits every COMMIT_EVERY frames; keys past
    the last left by an earlier attempt are deleted). Returns the frames' times."""
    prefix = video.name.encode("utf-8") + b"_"
    frame_times: list[float] = []
    txn = env.begin(write=True)
    try:
        for frame in frames:
            key = prefix + str(len(frame_times)).encode("ascii")
            txn.put(key, encode_frame(frame.image, layout.quality, layout.swap_rb, layout.image_format))
            frame_times.append(float(frame.time))
            if len(frame_times) % COMMIT_EVERY == 0:
                txn.commit()
                txn = env.begin(write=True)
        stale = len(frame_times)
        while txn.delete(prefix + str(stale).encode("ascii")):
            stale += 1
        txn.commit()
    except BaseException:
        txn.abort()
        raise
    if not frame_times:
        raise DataError(f"{video.source}: no frames decoded at {fps:g} fps.")
    return frame_times


def _existing_store(out: Path, layout: LmdbLayout, wanted: list[str]) -> Path:
    """`out` if it is a finished LMDB of these settings and videos; else a DataError saying what differs."""
    if not is_frames_lmdb(out):
        raise DataError(f"{out} exists and is not a frames LMDB; choose another --out.")
    old, recorded = read_layout(out)
    if recorded is None:
        raise DataError(f"{out} is an LMDB not written by plstitch; choose another --out.")
    if old != layout or sorted(recorded) != sorted(wanted):
        what = _diff(old, layout) or "other videos"
        raise DataError(
            f"{out} already holds frames written with other settings ({what}); choose another --out"
        )
    logger.info("%s is up to date (%d videos).", out, len(recorded))
    return out


def _diff(old: LmdbLayout, new: LmdbLayout) -> str:
    return ", ".join(
        f"{key}: {value!r} there, {getattr(new, key)!r} now"
        for key, value in asdict(old).items()
        if value != getattr(new, key)
    )


def lmdb_summary(path: str | os.PathLike) -> dict[str, Any]:
    """What a frames LMDB holds: folder, videos, frames, bytes on disk, its layout and whether every video's
    frame times are recorded (what `plstitch extract --frames` needs)."""
    folder = _lmdb_folder(path)
    layout, videos = read_layout(folder)
    frame_times = read_frame_times(folder) if videos is not None else {}
    if videos is None:
        videos = {name: len(ts) for name, ts in scan_keys(_reader(folder)).items()}
    return {
        "out": str(folder),
        "videos": len(videos),
        "frames": sum(videos.values()),
        "bytes": (folder / LMDB_DATA_FILE).stat().st_size,
        **asdict(layout),
        "frame_times": all(len(frame_times.get(name, ())) == n for name, n in videos.items()),
    }


__all__ = [
    "AUTHORS_FPS",
    "COMMIT_EVERY",
    "JPEG_QUALITY",
    "LAYOUT_FORMAT",
    "LMDB_DATA_FILE",
    "MAP_SIZE",
    "SIDECAR_NAME",
    "TIMES_NAME",
    "DecodeProgress",
    "LmdbFrameStore",
    "LmdbLayout",
    "decode_frame",
    "encode_frame",
    "is_frames_lmdb",
    "lmdb_summary",
    "read_layout",
    "scan_keys",
    "write_frames_lmdb",
]
