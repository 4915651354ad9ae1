"""The decoding side of a run: which decoder (`run_decoding`), how many workers (`default_workers`,
`decode_threads`) and the DataLoader whose workers decode whole videos into frame chunks (`make_loader`).

Workers take videos from a shared counter, largest first (`VideoFrameStream`). With a store, each video is
claimed there before it is decoded (`features.claim_video`), so that several runs into one store share the
work: a video another run holds is put off to the end, then waited for, and skipped if that run wrote it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch
from rich.text import Text
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from plstitch_eval.data.decoders import PYAV, Decoding, announce_decoding, resolve_decoding
from plstitch_eval.extract.chunks import FrameChunk, VideoJob, iter_clip_chunks, iter_video_chunks, note_chunk
from plstitch_eval.features import FeatureStore, VideoClaim, claim_video, file_state
from plstitch_eval.preprocess import FramePlan
from plstitch_eval.utils.console import console

CPU_WORKER_NICENESS = 10
CLAIM_POLL_SECONDS = 0.2  # how often a run waiting for another run's video looks again


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
                    yield note_chunk(jobs[index], elsewhere=True)
                else:
                    yield from chunks(jobs[index], self.plan, self.batch_size, threads, self.decoding)
            for job in put_off:  # held by another run: wait until it lets go, then skip or take the video
                if (state := claims.take(job)) == "busy":
                    yield note_chunk(job, waiting=True)
                while state == "busy":
                    time.sleep(CLAIM_POLL_SECONDS)
                    state = claims.take(job)
                if state == "elsewhere":
                    yield note_chunk(job, elsewhere=True)
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
