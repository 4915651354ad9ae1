"""Frames LMDBs (the authors' / LEMON's layout) as a format, and `FrameCache`: evaluation frames from one.

Keys are `<video>_<t>` (t = sample number at the store's frame rate, decimal, no padding), values are JPEG or
PNG bytes (our writer: JPEG at a chosen quality, or lossless PNG; `LmdbLayout.image_format`). The authors'
writers hand an RGB array to `cv2.imencode` and their reader takes what `cv2.imdecode` returns as RGB, so the
bytes hold the frame with red and blue swapped for a standard decoder; `swap_rb=True` (the default, and what
an LMDB without our sidecar is assumed to be) keeps that convention. Our writer
(`plstitch_train.frames_lmdb.write_frames_lmdb`) leaves two files in the LMDB folder, which the authors'
reader ignores (a key of our own would break their key parsing):

- `plstitch_frames.json`: format, layout (frame rate, size, image format and JPEG quality, colour order,
  source, decoder) and the finished videos with their frame counts;
- `plstitch_frame_times.jsonl` (format /2 on): a line `{"video": name, "times": [s, ...]}` per finished
  video, the presentation time of each sample `t` exactly as the decoder gave it (`DecodedFrame.time`).
  Appended video by video, so a long write never rewrites it; format /1 sidecars (no times) still read.

`FrameCache` reads such an LMDB in place of decoding video for `plstitch extract --frames`. Each process opens
its own read-only environment on first use and closes it before any fork (LMDB's rule across fork: DataLoader
workers and DDP ranks never use the parent's handle); readers hold a transaction only while copying a batch of
values out, never across a `yield`.
"""

from __future__ import annotations

import io
import json
import os
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import torch
from PIL import Image
from torchvision.io import ImageReadMode, decode_jpeg

from plstitch_eval.data.datasets.registry import dataset_class, list_datasets
from plstitch_eval.data.video import DecodedFrame
from plstitch_eval.errors import DataError, DecodeError
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import atomic_path

LMDB_DATA_FILE = "data.mdb"
SIDECAR_NAME = "plstitch_frames.json"
TIMES_NAME = "plstitch_frame_times.jsonl"
LAYOUT_FORMAT = "plstitch-frames-lmdb/2"  # /2: frame times recorded in TIMES_NAME
LAYOUT_FORMATS = ("plstitch-frames-lmdb/1", LAYOUT_FORMAT)  # the formats `read_layout` reads
AUTHORS_FPS = 1.0  # the authors' LMDBs (LEMON) hold 1 fps frames
MAP_SIZE = 1 << 40  # 1 TiB of address space; the file only grows as frames are written
READ_GROUP = 64  # values copied out per read transaction by `FrameCache.frames`
JPEG, PNG = "jpeg", "png"
IMAGE_FORMATS = (JPEG, PNG)  # what our writer stores: JPEG (lossy, at a quality) or PNG (lossless)
CACHE_KINDS = {JPEG: "jpeg-lmdb", PNG: "png-lmdb"}  # what `FrameCache.record` names as the frames' origin
CACHE_KIND = CACHE_KINDS[JPEG]
EVAL_FRAMES_FORMAT = PNG  # `write-lmdb --eval-frames` default: JPEG 90 moved the quickstart's k-NN 2.2 points
PNG_COMPRESS_LEVEL = 1  # zlib level of PNG values: lossless at any; 1 writes fastest (docs/frame-cache.md)
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class LmdbLayout:
    """How a frames LMDB was written: what a reader needs (fps, colour order) and what a resume must match."""

    fps: float = AUTHORS_FPS
    swap_rb: bool = True  # bytes decode (standard decoders) to BGR: the authors' cv2 convention
    frame_size: int | None = None  # shorter side; None = as the source was
    quality: int | None = None  # JPEG quality; None = unknown (not written by us) or PNG
    source: str | None = None  # what the frames came from (a resume must name the same)
    decoder: str = "pyav"  # video decoder (plstitch_eval.data.decoders); sidecars without one: PyAV
    image_format: str = JPEG  # values' encoding (IMAGE_FORMATS); sidecars without one: JPEG


def is_frames_lmdb(path: str | os.PathLike) -> bool:
    """True for an LMDB folder (holding `data.mdb`) or a `data.mdb` file itself."""
    path = Path(path)
    return (path.is_dir() and (path / LMDB_DATA_FILE).is_file()) or (
        path.is_file() and path.name == LMDB_DATA_FILE
    )


def _lmdb_folder(path: str | os.PathLike) -> Path:
    path = Path(path)
    return path.parent if path.name == LMDB_DATA_FILE and path.is_file() else path


def _open_env(folder: Path, *, write: bool = False) -> Any:
    if write:
        return lmdb.open(str(folder), map_size=MAP_SIZE, subdir=True, metasync=False)
    # lock=False: read-only training readers need no reader table (the authors' setting); readahead off
    # because reads are random frames of a store possibly far larger than memory.
    return lmdb.open(str(folder), readonly=True, lock=False, readahead=False, subdir=True)


_READERS: dict[str, Any] = {}  # resolved folder -> this process's read-only environment


def _reader(folder: Path) -> Any:
    """The process's one read-only environment of `folder` (py-lmdb allows one per path and process)."""
    key = str(folder.resolve())
    if key not in _READERS:
        _READERS[key] = _open_env(folder)
    return _READERS[key]


def _close_readers() -> None:
    """Close every reader before a fork, so no child inherits an LMDB handle (LMDB's rule; py-lmdb would also
    refuse to reopen an inherited path). Readers reopen on their next read."""
    for env in _READERS.values():
        env.close()
    _READERS.clear()


os.register_at_fork(before=_close_readers)


def read_layout(folder: str | os.PathLike) -> tuple[LmdbLayout, dict[str, int] | None]:
    """The layout recorded beside an LMDB and its finished videos; the authors' defaults without a sidecar."""
    sidecar = _lmdb_folder(folder) / SIDECAR_NAME
    if not sidecar.is_file():
        return LmdbLayout(), None
    try:
        data = json.loads(sidecar.read_text())
        if data.get("format") not in LAYOUT_FORMATS:
            raise ValueError(f"format {data.get('format')!r}, expected one of {', '.join(LAYOUT_FORMATS)}")
        layout = LmdbLayout(**data["layout"])
        if layout.image_format not in IMAGE_FORMATS:
            raise ValueError(f"image format {layout.image_format!r}, expected {' or '.join(IMAGE_FORMATS)}")
        return layout, {str(k): int(v) for k, v in data["videos"].items()}
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(
            f"{sidecar}: not a readable plstitch frames record ({exc}); remove it to read the "
            "LMDB in the authors' layout (1 fps, cv2 colour order)."
        ) from exc


def cache_kind(folder: str | os.PathLike) -> str:
    """What a feature store's `preprocessing.frames` names for frames from this cache: `jpeg-lmdb` (also an
    LMDB without our record) or lossless `png-lmdb`."""
    return CACHE_KINDS[read_layout(folder)[0].image_format]


def _write_layout(folder: Path, layout: LmdbLayout, videos: dict[str, int]) -> None:
    with atomic_path(folder / SIDECAR_NAME) as tmp:
        record = {
            "format": LAYOUT_FORMAT,
            "layout": asdict(layout),
            "videos": videos,
            "frame_times": TIMES_NAME,
        }
        tmp.write_text(json.dumps(record, indent=1))


def read_frame_times(folder: str | os.PathLike) -> dict[str, list[float]]:
    """Video -> its samples' times (s) as recorded beside an LMDB; {} when none were (format /1, authors').

    The last line of a video wins (a video decoded again after a crash appends anew); a torn last line (a
    writer killed mid-line) is skipped: its video is not marked finished in the sidecar either.
    """
    path = _lmdb_folder(folder) / TIMES_NAME
    if not path.is_file():
        return {}
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    times: dict[str, list[float]] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            times[str(entry["video"])] = [float(t) for t in entry["times"]]
        except (ValueError, KeyError, TypeError) as exc:
            if number == len(lines):  # no newline after it: cut short by a kill
                break
            raise DataError(f"{path}:{number}: not a frame-times line ({exc}); rewrite the LMDB.") from exc
    return times


def append_frame_times(folder: Path, video: str, frame_times: Sequence[float]) -> None:
    """Record one finished video's sample times (exact float reprs), durably, before the sidecar names it."""
    line = json.dumps({"video": video, "times": [float(t) for t in frame_times]}, separators=(",", ":"))
    with open(folder / TIMES_NAME, "a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())


def rewrite_frame_times(folder: Path, times: dict[str, list[float]]) -> None:
    """Replace the times file by `times` (a resume keeps the finished videos' lines, drops torn or stale)."""
    with atomic_path(folder / TIMES_NAME) as tmp:
        tmp.write_text(
            "".join(
                json.dumps({"video": name, "times": ts}, separators=(",", ":")) + "\n"
                for name, ts in times.items()
            ),
            encoding="utf-8",
        )


def scan_keys(env: Any) -> dict[str, list[int]]:
    """Video name -> sorted frame indices, from keys `<video>_<t>`; other keys are skipped with a warning."""
    frames: dict[str, list[int]] = defaultdict(list)
    skipped, example = 0, None
    with env.begin(buffers=False) as txn:
        for key in txn.cursor().iternext(keys=True, values=False):
            name, sep, index = key.rpartition(b"_")
            if not sep or not name or not index.isdigit():
                skipped, example = skipped + 1, example or key
                continue
            frames[name.decode("utf-8", errors="replace")].append(int(index))
    if skipped:
        logger.warning("Skipped %d LMDB keys not of the form <video>_<t> (e.g. %r).", skipped, example)
    return {name: sorted(set(ts)) for name, ts in sorted(frames.items())}


def decode_frame(value: bytes, swap_rb: bool) -> np.ndarray:
    """Encoded image bytes (JPEG, PNG, ...) -> uint8 [H, W, 3] RGB (channels reversed back when `swap_rb`)."""
    array = _decode_rgb(value)
    return np.ascontiguousarray(array[..., ::-1]) if swap_rb else array


def _decode_rgb(value: bytes) -> np.ndarray:
    """Encoded image bytes -> uint8 [H, W, 3] as a standard decoder reads them (Pillow, libjpeg-turbo)."""
    with Image.open(io.BytesIO(value)) as image:
        return np.asarray(image.convert("RGB"))


def encode_frame(image: np.ndarray, quality: int | None, swap_rb: bool, image_format: str = JPEG) -> bytes:
    """uint8 [H, W, 3] RGB -> JPEG bytes at `quality`, or lossless PNG bytes (`image_format="png"`, quality
    unused), channels reversed first when `swap_rb`, as cv2.imencode would. cv2.imdecode reads either."""
    buffer = io.BytesIO()
    pixels = Image.fromarray(np.ascontiguousarray(image[..., ::-1] if swap_rb else image))
    if image_format == PNG:
        pixels.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    else:
        pixels.save(buffer, format="JPEG", quality=quality)
    return buffer.getvalue()


def is_png(value: bytes) -> bool:
    """True for PNG bytes (its signature), which nvJPEG cannot decode."""
    return value[:8] == _PNG_MAGIC


def source_dataset(source: str | None) -> tuple[str, str | None] | None:
    """(dataset, root or None) of a layout `source` written from a dataset (`name:root:split`), else None."""
    name, sep, rest = (source or "").partition(":")
    if not sep or ":" not in rest or name not in list_datasets():
        return None
    root = rest.rsplit(":", 1)[0]
    return name, (None if root == "None" else root)


def eval_write_command(source: str | None, fps: float | None = None) -> str:
    """The `plstitch write-lmdb` command that writes a dataset's evaluation frames (all its videos, at `fps`
    when that is not the dataset's evaluation rate), for error messages."""
    found = source_dataset(source)
    dataset, root = found if found else ("DATASET", "ROOT")
    args = f"--dataset {dataset}" + (f" --root {root}" if root else "")
    rate = "--eval-frames"
    if fps is not None and found and abs(fps - float(dataset_class(dataset).default_eval_fps)) > 1e-9:
        rate = f"--fps {fps:g} --size 0 --image-format png"
    return f"plstitch write-lmdb {args} {rate} --out NEW.lmdb"


class FrameCache:
    """A dataset's sampled frames read from a frames LMDB with recorded times, in place of decoding videos.

    `frames` and `batches` give exactly the samples (index, time) the decoder gave when the cache was written;
    pixels are the decoder's exactly in a PNG cache and differ by JPEG's loss in a JPEG one
    (docs/frame-cache.md). Picklable; safe across fork.
    """

    def __init__(
        self, folder: Path, layout: LmdbLayout, counts: dict[str, int], frame_times: dict[str, list[float]]
    ) -> None:
        self.folder, self.layout = folder, layout
        self.counts, self.frame_times = counts, frame_times

    @classmethod
    def open(cls, path: str | os.PathLike) -> FrameCache:
        """Read a cache's record (folder or its data.mdb); a DataError naming the fix if it has no times."""
        folder = _lmdb_folder(path)
        fix = "write one with plstitch write-lmdb --dataset DATASET --root ROOT --eval-frames --out NEW.lmdb"
        if folder.name.endswith(".partial"):
            raise DataError(f"{path}: an unfinished frames LMDB; rerun the write-lmdb command that wrote it.")
        if not is_frames_lmdb(folder):
            raise DataError(f"{path}: not a frames LMDB (no {LMDB_DATA_FILE}); {fix}.")
        layout, counts = read_layout(folder)
        if counts is None:
            raise DataError(
                f"{folder}: an LMDB without plstitch's record ({SIDECAR_NAME}), so its frames' times are "
                f"unknown; {fix}."
            )
        frame_times = read_frame_times(folder)
        untimed = [name for name, n in counts.items() if len(frame_times.get(name, ())) != n]
        if untimed:
            raise DataError(
                f"{folder}: no frame times recorded for {len(untimed)} of {len(counts)} videos (written "
                f"before plstitch recorded them); rewrite it with {eval_write_command(layout.source)}."
            )
        return cls(folder, layout, counts, {name: frame_times[name] for name in counts})

    @property
    def fps(self) -> float:
        """The frame rate the cache's videos were sampled at."""
        return self.layout.fps

    @property
    def names(self) -> list[str]:
        """The cached videos."""
        return list(self.counts)

    def check(self, names: Sequence[str], fps: float) -> None:
        """Refuse (one DataError line naming the fix) a cache at another frame rate or lacking any `names`."""
        if abs(float(fps) - self.layout.fps) > 1e-9:
            raise DataError(
                f"{self.folder}: holds frames sampled at {self.layout.fps:g} fps, this run samples {fps:g} "
                f"fps; write a cache at {fps:g} fps: {eval_write_command(self.layout.source, fps)}."
            )
        missing = [name for name in names if name not in self.counts]
        if missing:
            shown = ", ".join(missing[:3]) + (", ..." if len(missing) > 3 else "")
            raise DataError(
                f"{self.folder}: no frames of {len(missing)} of the {len(names)} videos ({shown}); write a "
                f"cache of every video: {eval_write_command(self.layout.source, fps)}."
            )

    @property
    def lossless(self) -> bool:
        """True when the cache holds PNG frames: the decoder's pixels exactly."""
        return self.layout.image_format == PNG

    def record(self) -> dict[str, Any]:
        """What a feature store records about frames read from this cache (JSON-ready): their origin and
        encoding (`jpeg-lmdb` with its JPEG quality, or lossless `png-lmdb`), stored size (None = as decoded),
        colour order of the bytes and the decoder that made them. A JPEG cache's record is what it was before
        PNG caches existed, so stores made from one resume."""
        quality = {} if self.lossless else {"jpeg_quality": self.layout.quality}
        return {
            "frames": CACHE_KINDS.get(self.layout.image_format, self.layout.image_format),
            **quality,
            "frame_size": self.layout.frame_size,
            "swap_rb": self.layout.swap_rb,
            "frames_decoder": self.layout.decoder,
        }

    def __len__(self) -> int:
        return len(self.counts)

    def _groups(self, video: str, size: int) -> Iterator[tuple[int, list[bytes]]]:
        """(first index, encoded samples) of `video` in groups of `size`, each copied out of one short read
        transaction (none stays open across a yield, so a fork between groups is safe)."""
        if video not in self.counts:
            raise DecodeError(f"{self.folder}: no video {video!r} in this frame cache.")
        prefix, count = video.encode("utf-8") + b"_", self.counts[video]
        for start in range(0, count, size):
            with _reader(self.folder).begin(buffers=False) as txn:
                values = [
                    txn.get(prefix + str(t).encode("ascii")) for t in range(start, min(start + size, count))
                ]
            for t, value in enumerate(values, start):
                if value is None:
                    raise DecodeError(f"{self.folder}: frame {t} of {video} is missing (key {video}_{t}).")
            yield start, values

    def frames(self, video: str) -> Iterator[DecodedFrame]:
        """`video`'s samples in order as (index, time, uint8 HWC RGB), decoded on the CPU (Pillow)."""
        times = self.frame_times.get(video, [])
        for start, values in self._groups(video, READ_GROUP):
            for t, value in enumerate(values, start):
                yield DecodedFrame(t, times[t], decode_frame(value, self.layout.swap_rb))

    def batches(
        self, video: str, batch_size: int, device: str | torch.device = "cpu"
    ) -> Iterator[tuple[list[float], torch.Tensor]]:
        """(times, uint8 [n, 3, H, W] RGB on `device`) of `video`'s samples, `batch_size` at a time: on CUDA
        JPEGs are decoded there in batches by nvJPEG (`torchvision.io.decode_jpeg`) and PNGs (which nvJPEG
        cannot read) on the CPU by Pillow, then copied there; elsewhere every frame is decoded by Pillow."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        device = torch.device(device)
        times = self.frame_times.get(video, [])
        for start, values in self._groups(video, batch_size):
            on_cuda = device.type == "cuda"
            images = _decode_cuda(values, device) if on_cuda else [_decode_rgb(value) for value in values]
            shapes = sorted({tuple(image.shape) for image in images})
            if len(shapes) > 1:
                raise DecodeError(
                    f"{self.folder}: frames of {video} differ in size {shapes}; every frame of a video must "
                    "have one size (rewrite the cache with plstitch write-lmdb)."
                )
            # [n, 3, H, W] with the channels as stored; the flip (a copy) undoes the authors' cv2 order
            batch = torch.stack(images) if on_cuda else torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)
            batch = batch.flip(1) if self.layout.swap_rb else batch.contiguous()
            yield times[start : start + len(values)], batch.to(device)

    def __repr__(self) -> str:
        return f"FrameCache({str(self.folder)!r}, {len(self)} videos at {self.layout.fps:g} fps)"


def _decode_cuda(values: list[bytes], device: torch.device) -> list[torch.Tensor]:
    """Encoded bytes -> uint8 [3, H, W] each on `device`, channels as stored: JPEGs decoded there by batched
    nvJPEG, PNGs (nvJPEG reads only JPEG) on the CPU by Pillow (the CPU path's pixels exactly) and copied."""
    images: list[torch.Tensor | None] = [None] * len(values)
    jpegs = [i for i, value in enumerate(values) if not is_png(value)]
    if jpegs:
        data = [torch.frombuffer(bytearray(values[i]), dtype=torch.uint8) for i in jpegs]
        for i, image in zip(jpegs, decode_jpeg(data, mode=ImageReadMode.RGB, device=device), strict=True):
            images[i] = image
    for i, value in enumerate(values):
        if images[i] is None:
            images[i] = torch.from_numpy(_decode_rgb(value)).permute(2, 0, 1).to(device)
    return images  # type: ignore[return-value]


__all__ = [
    "AUTHORS_FPS",
    "CACHE_KIND",
    "CACHE_KINDS",
    "EVAL_FRAMES_FORMAT",
    "IMAGE_FORMATS",
    "JPEG",
    "LAYOUT_FORMAT",
    "LAYOUT_FORMATS",
    "LMDB_DATA_FILE",
    "MAP_SIZE",
    "PNG",
    "SIDECAR_NAME",
    "TIMES_NAME",
    "FrameCache",
    "LmdbLayout",
    "append_frame_times",
    "cache_kind",
    "decode_frame",
    "encode_frame",
    "eval_write_command",
    "is_frames_lmdb",
    "is_png",
    "read_frame_times",
    "read_layout",
    "rewrite_frame_times",
    "scan_keys",
    "source_dataset",
]
