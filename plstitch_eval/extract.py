"""Frozen feature extraction: dataset adapter -> decoding workers -> encoder -> feature store.

DataLoader workers each decode whole videos sequentially and prepare uint8 model crops (resize with the
model's interpolation, or on decode with `resize_on_decode`; centre crop) while the main process runs batched
forwards; normalisation happens on the device (both steps from `plstitch_eval.preprocess`). Each video is
written atomically as soon as its last frame is encoded, so a killed run leaves a consistent store that a
rerun resumes. A clip encoder (`Encoder.clip`) gets, for each sampled frame, the window of frames around it,
built from the same single decoding pass (`plstitch_eval.data.video.read_clips`); the store still holds one
feature per sampled frame and its manifest records the window.
With `crop_black_margin` (`--crop-black-margin`), each video's black border is found first, on its first 64 s
(`plstitch_eval.data.margin`), and cut before the model's resize; the manifest records each box under
`black_margins`.
Videos are decoded by PyAV, or by TorchCodec (`--decoder`, `plstitch_eval.data.decoders`: the same frames);
TorchCodec on CUDA (NVDEC) decodes in the main process and the frames are resized and cropped on the GPU,
never copied to the host. The manifest's preprocessing records a decoder other than PyAV.
Under `torchrun` (RANK/WORLD_SIZE set) rank r takes videos[r::world_size] and rank 0 writes the manifest.

A video already in the store is skipped only when its file checks out (`FeatureStore.check`: safetensors
header, shapes, the frame count the manifest recorded); a damaged one is extracted again. Several runs into
one store share the work: each claims a video before decoding it (`features.claim_video`), leaves videos
another run has claimed for the end and then waits for them, skipping each that the other run wrote.

Under torchrun run it as `torchrun ... -m plstitch_eval extract ...` (same options as `plstitch extract`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, is_dataclass, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from rich.progress import TextColumn
from rich.table import Table
from rich.text import Text
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from plstitch_eval import __version__
from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord, get_dataset, labels_at, tools_at
from plstitch_eval.data.decoders import (
    PYAV,
    Decoding,
    announce_decoding,
    check_decoder_options,
    frame_batches,
    read_clips,
    read_frames,
    resolve_decoding,
)
from plstitch_eval.data.margin import detect_video_margin, detection_record
from plstitch_eval.errors import ConfigError, DecodeError, FeatureStoreError
from plstitch_eval.features import (
    BLACK_MARGINS,
    LOCK_DIR,
    MANIFEST,
    VIDEO_FRAMES,
    FeatureStore,
    VideoClaim,
    VideoFeatures,
    claim_video,
    file_state,
    read_shapes,
    store_lock,
)
from plstitch_eval.preprocess import FramePlan, frame_plan, normalize_crops, prepare_frame, resize_and_crop
from plstitch_eval.utils.console import console, logger, print_error, progress_bar
from plstitch_eval.utils.device import PRECISIONS, autocast, resolve_device, resolve_precision
from plstitch_eval.utils.distributed import DistInfo, init_distributed, teardown_distributed

SUMMARY_ROWS = 30  # per-video rows shown in the end-of-run table; failures are always shown
CPU_WORKER_NICENESS = 10
EXTRA_COMPAT_FIELDS = ("precision",)  # besides features.compat_key: bf16 and fp32 features never mix
CLAIM_POLL_SECONDS = 0.2  # how often a run waiting for another run's video looks again
ELSEWHERE = "another run extracted it"  # note of a video skipped because a concurrent run wrote it


# --------------------------------------------------------------------------------------------- results


@dataclass
class VideoResult:
    """Outcome of one video: `done`, `skipped` (already in the store; `note` says when another run wrote it
    meanwhile) or `failed` (with the error)."""

    video: str
    status: str
    frames: int = 0
    seconds: float = 0.0
    error: str | None = None
    note: str | None = None

    @property
    def frames_per_second(self) -> float:
        """Frames encoded per wall-clock second for this video (0 when skipped)."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0


@dataclass
class ExtractSummary:
    """What an extraction run did: one `VideoResult` per selected video, in dataset order."""

    store: Path
    results: list[VideoResult]
    seconds: float
    world_size: int = 1
    rank: int = 0

    @property
    def failed(self) -> list[VideoResult]:
        """Videos that could not be extracted."""
        return [r for r in self.results if r.status == "failed"]

    @property
    def ok(self) -> bool:
        """True when no video failed."""
        return not self.failed

    @property
    def frames(self) -> int:
        """Frames encoded in this run (skipped videos excluded)."""
        return sum(r.frames for r in self.results if r.status == "done")

    @property
    def frames_per_second(self) -> float:
        """End-to-end throughput of this run."""
        return self.frames / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (for `--json` on stdout)."""
        return {
            "store": str(self.store),
            "seconds": self.seconds,
            "frames": self.frames,
            "frames_per_second": self.frames_per_second,
            "world_size": self.world_size,
            "ok": self.ok,
            "videos": [{**asdict(r), "frames_per_second": r.frames_per_second} for r in self.results],
        }


# --------------------------------------------------------------------------------------- data loading


@dataclass
class FrameChunk:
    """Up to `batch_size` consecutive frames of one video, or the error that stopped its decoding, or (no
    frames) word that another run holds the video (`waiting`; more chunks follow) or wrote it
    (`elsewhere`). A video's last chunk carries its black-margin box (`MarginBox.to_dict`) when the plan
    crops margins."""

    video_index: int
    images: torch.Tensor  # [n, 3, H, W] uint8 frames, or [n, T, 3, H, W] windows for a clip encoder
    frame_times: torch.Tensor  # [n] float64 seconds (of the sampled frames)
    last: bool
    error: str | None = None
    waiting: bool = False
    elsewhere: bool = False
    margin: dict[str, float] | None = None

    def pin_memory(self) -> FrameChunk:
        """Called by the DataLoader's pinning thread so the host-to-device copy can be asynchronous."""
        self.images = self.images.pin_memory()
        return self


@dataclass(frozen=True)
class VideoJob:
    """One video to decode: its position in the dataset, its file or frame folder, a folder's frame rate;
    for a run into a store, its name there and the state of its store file when the run was planned
    (`features.file_state`: None when absent), so that a file another run writes meanwhile is noticed."""

    index: int
    source: Path
    folder_fps: float | None = None
    video: str | None = None
    seen: tuple[int, int, int] | None = None


def _decode_error_message(source: Path, exc: BaseException) -> str:
    """Error text that always names the file."""
    text = str(exc) or type(exc).__name__
    return text if str(source) in text else f"{source}: {text}"


def _batched_chunks(
    job: VideoJob,
    items: Iterator[tuple[float, Any]],
    item_shape: tuple[int, ...],
    batch_size: int,
    fill: Callable[[torch.Tensor, Any], None],
    device: torch.device | None = None,
) -> Iterator[FrameChunk]:
    """(time, payload) items of one video -> uint8 chunks of `batch_size` [n, *item_shape] on `device` (the
    host when None); `fill` writes one payload into its buffer slot. A decoder error, or no item at all, ends
    the video with an error chunk."""
    buffer = torch.empty((batch_size, *item_shape), dtype=torch.uint8, device=device)
    times = torch.empty(batch_size, dtype=torch.float64)
    n = total = 0
    try:
        for time_s, payload in items:
            fill(buffer[n], payload)
            times[n] = time_s
            n += 1
            if n == batch_size:  # hand the full buffers over (no copy) and start new ones
                yield FrameChunk(job.index, buffer, times, False)
                buffer, times = torch.empty_like(buffer), torch.empty_like(times)
                total += n
                n = 0
    except Exception as exc:  # any decoder failure becomes a per-video error naming the file
        message = _decode_error_message(job.source, exc)
        yield FrameChunk(job.index, buffer[:0].clone(), times[:0].clone(), True, message)
        return
    if total + n == 0:
        message = f"{job.source}: no frames could be decoded."
        yield FrameChunk(job.index, buffer[:0].clone(), times[:0].clone(), True, message)
        return
    yield FrameChunk(job.index, buffer[:n].clone(), times[:n].clone(), True)


def iter_video_chunks(
    job: VideoJob, plan: FramePlan, batch_size: int, threads: int = 0, decoding: Decoding = PYAV
) -> Iterator[FrameChunk]:
    """Decode one video sequentially (`threads` FFmpeg threads, 0 = default) into uint8 [n,3,H,W] chunks; an
    error ends it with an error chunk. A video file decoded on CUDA goes to `iter_device_chunks`."""
    if plan.crop_black_margin and plan.margin is None:
        again = partial(iter_video_chunks, job, batch_size=batch_size, threads=threads, decoding=decoding)
        yield from _with_video_margin(job, plan, threads, decoding, again)
        return
    if decoding.on_cuda and job.source.is_file():
        yield from iter_device_chunks(job, plan, batch_size, decoding)
        return
    size = plan.resize if plan.resize_on_decode else None

    def frames() -> Iterator[tuple[float, Any]]:  # opened on first use, inside the chunker's error handling
        for frame in read_frames(
            job.source, plan.fps, size, folder_fps=job.folder_fps, threads=threads, decoding=decoding
        ):
            yield frame.time, frame.image

    def fill(slot: torch.Tensor, image: Any) -> None:
        slot.copy_(prepare_frame(image, plan))

    yield from _batched_chunks(job, frames(), (3, *plan.crop), batch_size, fill)


def iter_device_chunks(
    job: VideoJob, plan: FramePlan, batch_size: int, decoding: Decoding
) -> Iterator[FrameChunk]:
    """Decode one video file on the decoding's device (NVDEC) into uint8 [n,3,H,W] chunks there: frames are
    resized and cropped where they were decoded, a batch at a time, never copied to the host."""
    if plan.crop_black_margin and plan.margin is None:
        again = partial(iter_device_chunks, job, batch_size=batch_size, decoding=decoding)
        yield from _with_video_margin(job, plan, 0, decoding, again)
        return
    size = plan.resize if plan.resize_on_decode else None

    def crops() -> Iterator[tuple[float, torch.Tensor]]:  # opened inside the chunker's error handling
        for times, images in frame_batches(job.source, plan.fps, size, decoding=decoding):
            yield from zip(times, resize_and_crop(images, plan), strict=True)

    def fill(slot: torch.Tensor, crop: torch.Tensor) -> None:
        slot.copy_(crop)

    device = torch.device(decoding.device)
    yield from _batched_chunks(job, crops(), (3, *plan.crop), batch_size, fill, device)


def iter_clip_chunks(
    job: VideoJob, plan: FramePlan, batch_size: int, threads: int = 0, decoding: Decoding = PYAV
) -> Iterator[FrameChunk]:
    """Decode one video once into windows [n, T, 3, H, W] around its sampled frames (`plan.clip`); every
    frame a window uses is prepared once, on the host. An error ends the video with an error chunk, as for
    frames."""
    if plan.clip is None:
        raise ConfigError("iter_clip_chunks needs a plan with a clip window (FramePlan.clip).")
    if plan.crop_black_margin and plan.margin is None:
        again = partial(iter_clip_chunks, job, batch_size=batch_size, threads=threads, decoding=decoding)
        yield from _with_video_margin(job, plan, threads, decoding, again)
        return
    size = plan.resize if plan.resize_on_decode else None
    windows = read_clips(
        job.source,
        float(plan.fps or 0),
        plan.clip,
        size=size,
        folder_fps=job.folder_fps,
        prepare=lambda image: prepare_frame(image, plan),
        threads=threads,
        decoding=decoding.on_cpu(),
    )

    def fill(slot: torch.Tensor, frames: Any) -> None:
        for k, frame in enumerate(frames):  # frames shared by windows were prepared once
            slot[k] = frame

    items = ((window.time, window.frames) for window in windows)
    yield from _batched_chunks(job, items, (plan.clip.num_frames, 3, *plan.crop), batch_size, fill)


def _with_video_margin(
    job: VideoJob,
    plan: FramePlan,
    threads: int,
    decoding: Decoding,
    chunks: Callable[[FramePlan], Iterator[FrameChunk]],
) -> Iterator[FrameChunk]:
    """`chunks` of one video under its own plan: the video's black-margin box is found first
    (`detect_video_margin`, per video: borders differ between recordings) and its last chunk reports it; a
    video whose box cannot be found ends with an error chunk, as a decoding failure does."""
    try:
        box = detect_video_margin(job.source, folder_fps=job.folder_fps, threads=threads, decoding=decoding)
    except Exception as exc:  # any decoder failure becomes a per-video error naming the file
        empty, times = torch.empty(0, dtype=torch.uint8), torch.empty(0, dtype=torch.float64)
        yield FrameChunk(job.index, empty, times, True, _decode_error_message(job.source, exc))
        return
    for chunk in chunks(replace(plan, margin=box)):
        if chunk.last and chunk.error is None:
            chunk.margin = box.to_dict()
        yield chunk


class VideoFrameStream(IterableDataset):
    """Iterable over `FrameChunk`s; each DataLoader worker takes the next undecoded video, whole and in order.

    Workers take jobs from a shared counter, largest file first, so that they finish together (a fixed
    round-robin split leaves one worker decoding a long video while the others idle); the main process alone
    decodes in the given order. W workers share the cores: each decodes with cores // W FFmpeg threads (one
    when there is a worker per core, as a decode-only run with a process per core does); the main process
    alone uses FFmpeg's default.

    With a `store_root`, a video is claimed in the store (`features.claim_video`) before it is decoded and the
    claim is held until the main process has written it (`mark_written`); a video another run holds is put
    off to the end, then waited for, and skipped with an `elsewhere` chunk if that run wrote it. `decoding`
    names the video decoder (`plstitch_eval.data.decoders`).
    """

    def __init__(
        self,
        jobs: Sequence[VideoJob],
        plan: FramePlan,
        batch_size: int,
        store_root: Path | None = None,
        decoding: Decoding = PYAV,
    ) -> None:
        self.jobs = list(jobs)
        self.decoding = decoding
        self.largest_first = sorted(self.jobs, key=_job_size, reverse=True)
        self.plan = plan
        self.batch_size = batch_size
        self.store_root = store_root
        self.next_job = multiprocessing.Value("q", 0)  # shared with forked or spawned workers
        self.slot = {job.index: i for i, job in enumerate(self.jobs)}
        self.written = multiprocessing.RawArray("b", max(1, len(self.jobs)))  # set by the main process

    def _claim(self) -> int:
        with self.next_job.get_lock():
            index = self.next_job.value
            self.next_job.value += 1
        return index

    def mark_written(self, video_index: int) -> None:
        """Called by the main process once a video is written (or failed): its claim may be given back."""
        if video_index in self.slot:
            self.written[self.slot[video_index]] = 1

    def __iter__(self) -> Iterator[FrameChunk]:
        info = get_worker_info()
        threads = decode_threads(0 if info is None else info.num_workers)
        jobs = self.jobs if info is None else self.largest_first
        chunks = iter_video_chunks if self.plan.clip is None else iter_clip_chunks
        claims = _Claims(self)
        try:
            put_off: list[VideoJob] = []
            while (index := self._claim()) < len(jobs):
                state = claims.take(jobs[index])
                if state == "busy":
                    put_off.append(jobs[index])
                elif state == "elsewhere":
                    yield _note_chunk(jobs[index], elsewhere=True)
                else:
                    yield from chunks(jobs[index], self.plan, self.batch_size, threads, self.decoding)
            for job in put_off:  # held by another run: wait until it lets go, then skip or take the video
                if (state := claims.take(job)) == "busy":
                    yield _note_chunk(job, waiting=True)
                while state == "busy":
                    time.sleep(CLAIM_POLL_SECONDS)
                    state = claims.take(job)
                if state == "elsewhere":
                    yield _note_chunk(job, elsewhere=True)
                else:
                    yield from chunks(job, self.plan, self.batch_size, threads, self.decoding)
            claims.wait_until_written()
        finally:
            claims.release_all()


class _Claims:
    """The video claims a decoding process holds, each given back once the main process wrote the video."""

    def __init__(self, stream: VideoFrameStream) -> None:
        self.stream = stream
        self.held: dict[int, VideoClaim] = {}  # video index -> claim

    def take(self, job: VideoJob) -> str:
        """Claim `job`'s video: `taken` (decode it), `busy` (another run holds it) or `elsewhere` (another
        run wrote it since this run was planned)."""
        self.release_written()
        root = self.stream.store_root
        if root is None or job.video is None:
            return "taken"
        claim = claim_video(root, job.video)
        if claim is None:
            return "busy"
        state = file_state(FeatureStore(root).path(job.video))
        if state is not None and state != job.seen:
            claim.release()
            return "elsewhere"
        self.held[job.index] = claim
        return "taken"

    def release_written(self) -> None:
        """Give back the claims of videos the main process has written."""
        for index in [i for i in self.held if self.stream.written[self.stream.slot[i]]]:
            self.held.pop(index).release()

    def wait_until_written(self) -> None:
        """Hold the last claims until their videos are written (released sooner, another run would redo
        them)."""
        while self.held:
            self.release_written()
            if self.held:
                time.sleep(CLAIM_POLL_SECONDS / 4)

    def release_all(self) -> None:
        """Give back every claim (the run ends or was stopped)."""
        for claim in self.held.values():
            claim.release()
        self.held.clear()


def _note_chunk(job: VideoJob, waiting: bool = False, elsewhere: bool = False) -> FrameChunk:
    """A frameless chunk saying that another run holds (`waiting`) or wrote (`elsewhere`) `job`'s video."""
    empty = torch.empty(0, dtype=torch.uint8)
    times = torch.empty(0, dtype=torch.float64)
    return FrameChunk(job.index, empty, times, elsewhere, waiting=waiting, elsewhere=elsewhere)


def _job_size(job: VideoJob) -> int:
    """Bytes of a video file, or files of a frame folder (0 when it cannot be read: its error comes later)."""
    try:
        if job.source.is_dir():
            return sum(1 for _ in os.scandir(job.source))
        return job.source.stat().st_size
    except OSError:
        return 0


def _worker_init(_: int) -> None:
    """Decoding workers leave the cores' torch threads to the model in the main process."""
    torch.set_num_threads(1)


def _cpu_worker_init(worker_id: int) -> None:
    """On a CPU device the model owns the cores: decode at lower priority, in the forward's gaps."""
    _worker_init(worker_id)
    with contextlib.suppress(OSError):
        os.nice(CPU_WORKER_NICENESS)


def make_loader(
    jobs: Sequence[VideoJob],
    plan: FramePlan,
    batch_size: int,
    num_workers: int,
    device: torch.device,
    store_root: Path | None = None,
    decoding: Decoding = PYAV,
) -> DataLoader:
    """DataLoader over whole-video decoding jobs; chunks are already batched, so `batch_size=None`. With
    `store_root`, videos are claimed in that store (see `VideoFrameStream`). Decoding on CUDA runs in the
    main process (no workers: CUDA does not cross a fork) and its chunks are already on the device."""
    workers = 0 if decoding.on_cuda else max(0, min(num_workers, len(jobs)))
    init = _cpu_worker_init if device.type == "cpu" else _worker_init
    return DataLoader(
        VideoFrameStream(jobs, plan, batch_size, store_root, decoding),
        batch_size=None,
        num_workers=workers,
        pin_memory=device.type == "cuda" and not decoding.on_cuda,
        worker_init_fn=init if workers else None,
        prefetch_factor=2 if workers else None,
        in_order=False,  # chunks carry their video index: take each as soon as any worker has one
    )


# ------------------------------------------------------------------------------------- distribution


def _broadcast_error(info: DistInfo, error: str | None) -> None:
    """Share rank 0's setup error (e.g. an incompatible store) so every rank stops instead of hanging."""
    if not info.active:
        return
    box = [error]
    dist.broadcast_object_list(box, src=0)
    if box[0] is not None:
        raise FeatureStoreError(box[0])


def _gather_results(info: DistInfo, results: list[VideoResult]) -> list[VideoResult]:
    """Collect every rank's per-video results on every rank."""
    if not info.active:
        return results
    gathered: list[list[VideoResult] | None] = [None] * info.world_size
    dist.all_gather_object(gathered, results)
    return [r for part in gathered for r in (part or [])]


# -------------------------------------------------------------------------------------------- manifest


def _jsonable(obj: Any) -> Any:
    """Dataclasses to dicts, tuples to lists, paths to strings (for the manifest)."""
    if is_dataclass(obj) and not isinstance(obj, type):
        obj = asdict(obj)
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def dataset_splits(adapter: DatasetAdapter) -> tuple[str, dict[str, dict[str, list[str]]]]:
    """(default scheme, {scheme: {split: video names}}) for every official split scheme of `adapter`."""
    schemes = [str(s) for s in adapter.split_schemes]
    return schemes[0], {scheme: dict(adapter.splits(scheme)) for scheme in schemes}


def preprocessing_record(data_config: Any, plan: FramePlan, decoding: Decoding = PYAV) -> dict[str, Any]:
    """The manifest's `preprocessing`: the model's DataConfig (+ `resize_on_decode` when that mode is on, + a
    clip encoder's window, so stores made with other windows never mix, + the black-margin detection when it
    is on, + a decoder other than PyAV and a CUDA decoding device: `Decoding.record`, absent from stores made
    before, which read as PyAV's)."""
    record = data_config.to_dict() if hasattr(data_config, "to_dict") else _jsonable(data_config)
    if plan.resize_on_decode:
        record["resize_on_decode"] = True
    if plan.clip is not None:
        record["clip"] = plan.clip.to_dict()
    if plan.crop_black_margin:
        record["crop_black_margin"] = detection_record()
    record.update(decoding.record())
    return record


def build_manifest(
    adapter: DatasetAdapter, encoder: Any, plan: FramePlan, precision: str, decoding: Decoding = PYAV
) -> dict[str, Any]:
    """Manifest of a store: dataset, splits, classes, model spec + provenance, preprocessing (with the
    decoder), fps, version."""
    default_scheme, schemes = dataset_splits(adapter)
    provenance = _jsonable(dict(getattr(encoder, "provenance", {}) or {}))
    return {
        "dataset": adapter.name,
        "dataset_root": str(getattr(adapter, "root", "") or ""),
        "class_names": list(adapter.class_names),
        "background_classes": list(getattr(adapter, "background_classes", []) or []),
        "tool_names": list(getattr(adapter, "tool_names", []) or []),
        "native_fps": getattr(adapter, "native_fps", None),
        "splits": schemes[default_scheme],
        "split_scheme": default_scheme,
        "split_schemes": schemes,
        "model": {
            "spec": provenance.get("spec") or getattr(encoder, "spec", None),
            "feature_dim": int(encoder.feature_dim),
            "provenance": provenance,
        },
        "preprocessing": preprocessing_record(encoder.data_config, plan, decoding),
        "fps": plan.fps,
        "feature_dim": int(encoder.feature_dim),
        "precision": precision,
        "plstitch_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def check_out_folder(root: Path) -> None:
    """Refuse an `--out` that exists, is not empty and is not a feature store (checked before a model loads,
    again under the store's lock): extraction never deletes (`--overwrite`) or writes into such a folder."""
    if root.exists() and not root.is_dir():
        raise FeatureStoreError(f"{root} is a file, not a folder; choose a new or empty --out folder.")
    if (root / MANIFEST).exists() or not root.is_dir():
        return
    # ours: the lock folder, and a manifest another run is writing right now (or that a kill cut short)
    foreign = [
        p.name
        for p in root.iterdir()
        if p.name != LOCK_DIR and not (p.name.startswith(f".{MANIFEST}.") and p.name.endswith(".tmp"))
    ]
    if foreign:
        raise FeatureStoreError(
            f"{root} exists, is not empty and has no {MANIFEST}, so it is not a feature store; "
            "choose a new or empty --out folder."
        )


def open_store(root: Path, manifest: dict[str, Any], overwrite: bool) -> FeatureStore:
    """Create or resume the store at `root` (a resumed store keeps its creation time and its record of the
    videos written); runs starting together into one new folder create it once."""
    check_out_folder(root)  # before anything is written into the folder
    root.mkdir(parents=True, exist_ok=True)
    with store_lock(root):
        check_out_folder(root)
        return FeatureStore.create(root, manifest, overwrite=overwrite, also_compare=EXTRA_COMPAT_FIELDS)


# -------------------------------------------------------------------------------------------- pipeline


@dataclass
class ExtractOptions:
    """Settings of one extraction run (what `plstitch extract` exposes), checked when made."""

    fps: float | None = None  # None: the dataset's evaluation fps
    batch_size: int = 64
    num_workers: int | None = None  # None: a worker per core on CUDA, min(4, cores) on CPU
    device: str = "auto"  # auto | cpu | cuda | cuda:N (a torch.device is turned into its name)
    precision: str = "auto"  # auto = bf16 on CUDA, fp32 on CPU
    overwrite: bool = False
    fail_fast: bool = False
    videos: Sequence[str] | None = None  # None: every video of `split`
    split: str | None = None  # None: every video of the dataset
    split_scheme: str | None = None
    resize_on_decode: bool = False
    crop_black_margin: bool = False  # cut each video's black border first (plstitch_eval.data.margin)
    progress: bool = True
    decoder: str = "pyav"  # pyav | torchcodec | auto (plstitch_eval.data.decoders)
    decode_device: str = "auto"  # auto = the model's device for torchcodec, the CPU for pyav | cpu | cuda[:N]

    def __post_init__(self) -> None:
        self.device = str(self.device)
        check_decoder_options(self.decoder, self.decode_device)
        if self.fps is not None and not self.fps > 0:
            raise ConfigError(f"Extraction fps (--fps) must be > 0, got {self.fps}.")
        if self.batch_size < 1:
            raise ConfigError(f"Extraction batch_size (--batch-size) must be >= 1, got {self.batch_size}.")
        if self.num_workers is not None and self.num_workers < 0:
            raise ConfigError(f"Extraction num_workers (--num-workers) must be >= 0, got {self.num_workers}.")
        if self.precision != "auto" and self.precision not in PRECISIONS:
            known = " | ".join(["auto", *PRECISIONS])
            raise ConfigError(f"Extraction precision (--precision) must be {known}, got {self.precision!r}.")
        if isinstance(self.videos, str):
            raise ConfigError(f"Extraction videos must be a list of names, not the string {self.videos!r}.")


def _resolve_dataset(dataset: DatasetAdapter | str, root: str | Path | None) -> DatasetAdapter:
    """An adapter as given, or built from its registry name and `root`."""
    return get_dataset(dataset, root=root) if isinstance(dataset, str) else dataset


def _resolve_encoder(encoder: Any, device: torch.device) -> Any:
    """An Encoder moved to `device` in eval mode, loading it first when given as a spec."""
    if isinstance(encoder, (str, Path)):
        from plstitch_eval.hub import load_encoder

        return load_encoder(str(encoder), device=str(device))
    return encoder.to(device).eval()


def select_videos(
    adapter: DatasetAdapter, split: str | None, videos: Sequence[str] | None, scheme: str | None = None
) -> list[VideoRecord]:
    """Records of `split` (all when None), narrowed to `videos` when given; unknown names are an error."""
    records = list(adapter.videos(split=split, scheme=scheme) if split else adapter.videos())
    if videos:
        by_name = {r.name: r for r in records}
        unknown = [v for v in videos if v not in by_name]
        if unknown:
            where = f" split {split!r}" if split else ""
            raise ConfigError(
                f"Unknown video(s) {unknown} in dataset {adapter.name!r}{where}; known: "
                f"{', '.join(sorted(by_name)[:20])}{' ...' if len(by_name) > 20 else ''}."
            )
        records = [by_name[v] for v in videos]
    return records


def extract_features(
    dataset: DatasetAdapter | str,
    encoder: Any,
    out: str | Path,
    options: ExtractOptions | None = None,
    *,
    root: str | Path | None = None,
    on_video_done: Callable[[VideoResult], None] | None = None,
) -> ExtractSummary:
    """Encode every frame sampled at `options.fps` (default: the dataset's eval fps) into a resumable store.

    `dataset` is a DatasetAdapter or a registry name (with `root`); `encoder` an Encoder or a model spec,
    loaded only once the dataset's videos and annotations are found and `out` can be a store.
    Videos already in the store are skipped (once their file checks out); a decoding error fails that video
    only unless `fail_fast`. Under torchrun each rank extracts a disjoint share and every rank returns the
    merged summary. `on_video_done` is called after each video is written or skipped because another run
    wrote it (tests use it to interrupt a run).
    """
    options = options if options is not None else ExtractOptions()
    start = time.perf_counter()
    adapter = _resolve_dataset(dataset, root)
    records = select_videos(adapter, options.split, options.videos, options.split_scheme)
    check_out_folder(Path(out))
    dist_info, torch_device = init_distributed(resolve_device(options.device))
    try:
        summary = _extract(
            adapter,
            records,
            _resolve_encoder(encoder, torch_device),
            Path(out),
            options,
            torch_device,
            resolve_precision(options.precision, torch_device),
            dist_info,
            on_video_done,
        )
    finally:
        teardown_distributed(dist_info)
    summary.seconds = time.perf_counter() - start
    return summary


def _extract(
    adapter: DatasetAdapter,
    records: list[VideoRecord],
    encoder: Any,
    out: Path,
    options: ExtractOptions,
    device: torch.device,
    precision: str,
    dist_info: DistInfo,
    on_video_done: Callable[[VideoResult], None] | None,
) -> ExtractSummary:
    """The run itself: open the store, shard, decode in workers, encode in batches, write per video."""
    fps = float(options.fps) if options.fps is not None else float(adapter.eval_fps)
    clip = getattr(encoder, "clip", None)
    plan = frame_plan(encoder.data_config, fps, options.resize_on_decode, clip, options.crop_black_margin)
    sources = [r.source for r in records]
    decoding = run_decoding(
        options.decoder, options.decode_device, device, plan, sources, dist_info.rank == 0
    )

    # Rank 0 creates (or validates) the store and writes the manifest before any video, so that a killed
    # run is resumable; the other ranks wait for it and then open the same folder.
    setup_error: str | None = None
    store: FeatureStore | None = None
    if dist_info.rank == 0:
        try:
            manifest = build_manifest(adapter, encoder, plan, precision, decoding)
            store = open_store(out, manifest, options.overwrite)
        except FeatureStoreError as exc:
            if not dist_info.active:
                raise
            setup_error = str(exc)
    _broadcast_error(dist_info, setup_error)
    store = store or FeatureStore(out)

    mine = list(range(len(records)))[dist_info.rank :: dist_info.world_size]
    results, jobs = _plan_videos(store, records, mine)

    num_workers = default_workers(device) if options.num_workers is None else options.num_workers
    columns = (TextColumn("{task.fields[frames]} frames"), TextColumn("{task.fields[rate]:.1f} frames/s"))
    progress = options.progress and dist_info.rank == 0
    with progress_bar(*columns, disable=not progress) as bar:
        task = bar.add_task("extract", total=len(mine), completed=len(results), frames=0, rate=0.0)
        if jobs:
            loader = make_loader(jobs, plan, options.batch_size, num_workers, device, store.root, decoding)
            run = _EncodeLoop(store, records, encoder, plan, device, precision)
            for result in run.results(loader, options.fail_fast):
                results[run.index_of[result.video]] = result
                elapsed = time.perf_counter() - run.started
                bar.update(task, advance=1, frames=run.frames, rate=run.frames / elapsed if elapsed else 0.0)
                if result.status == "failed":
                    logger.error("video %s failed: %s", result.video, result.error)
                    continue
                if result.note == ELSEWHERE:
                    console.print(Text(f"{result.video}: {ELSEWHERE}"), soft_wrap=True)
                if on_video_done is not None:
                    on_video_done(result)

    all_results = _gather_results(dist_info, [results[i] for i in mine])
    order = {r.name: i for i, r in enumerate(records)}
    all_results.sort(key=lambda r: order[r.video])
    if dist_info.active:
        dist.barrier()
    return ExtractSummary(out, all_results, 0.0, world_size=dist_info.world_size, rank=dist_info.rank)


def run_decoding(
    decoder: str,
    decode_device: str,
    device: torch.device,
    plan: FramePlan,
    sources: Sequence[str | Path],
    announce: bool = True,
) -> Decoding:
    """The decoder and decoding device of a run over `sources` (`decoders.resolve_decoding`; `auto` tries the
    first video file), said once on stderr when `auto` chose. Clip encoders assemble their windows on the
    host, so they decode on the CPU (a one-line notice when CUDA was asked for)."""
    sample = next((s for s in sources if Path(s).is_file()), None)
    decoding = resolve_decoding(decoder, decode_device, device, sample)
    if plan.clip is not None and decoding.on_cuda:
        decoding = decoding.on_cpu()
        if announce:
            note = f" clip encoders decode on the CPU (windows are built on the host): {decoding.describe()}"
            console.print(Text.assemble(("note:", "yellow"), note), soft_wrap=True, highlight=False)
    if announce:
        announce_decoding(decoder, decoding)
    return decoding


def _plan_videos(
    store: FeatureStore, records: list[VideoRecord], mine: list[int]
) -> tuple[dict[int, VideoResult], list[VideoJob]]:
    """Skip each of `mine` whose stored file checks out (header, shapes, recorded frame count); every other
    one becomes a job, a damaged file with a line on stderr. Files the manifest has no frame count for (a
    store from an older version) get theirs recorded."""
    manifest = store.manifest
    recorded = manifest.get(VIDEO_FRAMES) or {}
    results: dict[int, VideoResult] = {}
    jobs: list[VideoJob] = []
    unrecorded: dict[str, int] = {}
    for index in mine:
        record = records[index]
        seen = file_state(store.path(record.name))
        if seen is not None:
            problem = store.check(record.name, manifest)
            if problem is None:
                results[index] = VideoResult(record.name, "skipped")
                if record.name not in recorded:
                    unrecorded[record.name] = read_shapes(store.path(record.name))[0]
                continue
            print_error(
                f"{record.name}: stored file unreadable ({problem}), extracting again", "warning", "yellow"
            )
        jobs.append(VideoJob(index, Path(record.source), record.folder_fps, record.name, seen))
    store.record_frames(unrecorded)
    return results, jobs


class _EncodeLoop:
    """Consumes frame chunks, runs batched forwards and writes each video as soon as its last chunk is in."""

    def __init__(
        self,
        store: FeatureStore,
        records: list[VideoRecord],
        encoder: Any,
        plan: FramePlan,
        device: torch.device,
        precision: str,
    ) -> None:
        self.store = store
        self.records = records
        self.index_of = {r.name: i for i, r in enumerate(records)}
        self.encoder = encoder
        self.plan = plan
        self.device = device
        self.precision = precision
        self.frames = 0
        self.started = time.perf_counter()

    def results(self, loader: DataLoader, fail_fast: bool) -> Iterator[VideoResult]:
        """Yield one `VideoResult` per finished video: written, failed, or skipped as another run wrote it."""
        pending: dict[int, tuple[list[torch.Tensor], list[np.ndarray], float]] = {}
        stream = loader.dataset
        for chunk in loader:
            record = self.records[chunk.video_index]
            if chunk.waiting:
                message = f"{record.name}: another run is extracting it; waiting for that run"
                console.print(Text(message), soft_wrap=True)
                continue
            if chunk.elsewhere:
                yield VideoResult(record.name, "skipped", note=ELSEWHERE)
                continue
            feats, times, started = pending.setdefault(chunk.video_index, ([], [], time.perf_counter()))
            if chunk.error is not None:
                pending.pop(chunk.video_index)
                stream.mark_written(chunk.video_index)  # nothing to protect: another run may try it
                if fail_fast:
                    raise DecodeError(f"{chunk.error} (stopped: --fail-fast)")
                yield VideoResult(record.name, "failed", error=chunk.error)
                continue
            if len(chunk.images):
                feats.append(self.encode(chunk.images))
                times.append(chunk.frame_times.numpy())
                self.frames += len(chunk.images)
            if chunk.last:
                pending.pop(chunk.video_index)
                if chunk.margin is not None:  # recorded before its features: a written video has its box
                    self.store.record_per_video(BLACK_MARGINS, {record.name: chunk.margin})
                result = self.write(record, feats, times, started)
                stream.mark_written(chunk.video_index)
                yield result

    @torch.inference_mode()
    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """One batched forward: uint8 frames (or windows) to the device, normalised there; float32 features
        stay there.

        Keeping them on the device until the video is complete avoids a host sync per batch on CUDA.
        """
        x = normalize_crops(images.to(self.device, non_blocking=True), self.plan)
        with autocast(self.device, self.precision):
            features = self.encoder(x)
        return features.float()

    def write(
        self, record: VideoRecord, feats: list[torch.Tensor], times: list[np.ndarray], started: float
    ) -> VideoResult:
        """Label the sampled frames (dropping those past the annotations) and write the video atomically."""
        frame_times = np.concatenate(times)
        labels, _ = labels_at(record, frame_times)
        keep = len(labels)
        features = torch.cat(feats)[:keep].cpu().numpy()
        tools = tools_at(record, frame_times[:keep])
        self.store.write(VideoFeatures(record.name, features, labels, frame_times[:keep], tools))
        return VideoResult(record.name, "done", frames=keep, seconds=time.perf_counter() - started)


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def decode_threads(num_workers: int) -> int:
    """FFmpeg threads per decoding process: cores // workers (at least 1); 0 (FFmpeg's choice: every core)
    when the main process decodes alone."""
    return 0 if num_workers == 0 else max(1, available_cores() // num_workers)


def default_workers(device: torch.device) -> int:
    """Decoding workers when none are asked for: one per core where the model runs on an accelerator (the
    run is bound by decoding), min(4, cores) on CPU, where the model needs the cores too."""
    cores = available_cores()
    return cores if device.type != "cpu" else min(4, cores)


# --------------------------------------------------------------------------------------------- report


def summary_table(summary: ExtractSummary, max_rows: int = SUMMARY_ROWS) -> Table:
    """Rich table: one row per video (failures always; others up to `max_rows`) plus a total row."""
    table = Table(
        title=Text(f"Feature extraction -> {summary.store}", style="table.title"), show_footer=False
    )
    for name, justify in (
        ("video", "left"),
        ("frames", "right"),
        ("seconds", "right"),
        ("frames/s", "right"),
    ):
        table.add_column(name, justify=justify)
    table.add_column("status")
    shown = 0
    hidden = 0
    for r in summary.results:
        if r.status != "failed" and shown >= max_rows:
            hidden += 1
            continue
        shown += r.status != "failed"
        label, style = {
            "done": ("done", "green"),
            "skipped": (f"skipped ({r.note or 'in store'})", "dim"),
            "failed": ("failed", "red"),
        }[r.status]
        status = Text(label, style=style)
        if r.error:
            status.append(f": {r.error}", style=style)  # verbatim: errors hold paths
        table.add_row(Text(r.video), str(r.frames), f"{r.seconds:.1f}", f"{r.frames_per_second:.1f}", status)
    if hidden:
        table.add_row(f"... {hidden} more", "", "", "", "")
    counts = {s: sum(r.status == s for r in summary.results) for s in ("done", "skipped", "failed")}
    table.add_row(
        Text("total", style="bold"),
        str(summary.frames),
        f"{summary.seconds:.1f}",
        f"{summary.frames_per_second:.1f}",
        ", ".join(f"{n} {s}" for s, n in counts.items()),
    )
    return table


def print_summary(summary: ExtractSummary) -> None:
    """Print the summary table to stderr (silenced by `--quiet`)."""
    console.print(summary_table(summary))


__all__ = [
    "ExtractOptions",
    "ExtractSummary",
    "VideoResult",
    "build_manifest",
    "extract_features",
    "print_summary",
]
