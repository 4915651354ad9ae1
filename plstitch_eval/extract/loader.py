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
from plstitch_eval.data.frames_lmdb import FrameCache
from plstitch_eval.extract.chunks import FrameChunk, VideoJob, note_chunk
from plstitch_eval.extract.shared import iter_shared_chunks
from plstitch_eval.preprocess import FramePlan
from plstitch_eval.store.features import FeatureStore, VideoClaim, claim_video, file_state
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

    `plan` is one `FramePlan`, or one per model for a pass over several models: each video is then decoded
    once for the models its job names (`shared.iter_shared_chunks`), and `store_root` is one store folder
    per model. With a store, a video is claimed there (`features.claim_video`) before it is decoded and the
    claim is held until the main process has written it (`mark_written`); a video another run holds is put
    off to the end, then waited for, and skipped with an `elsewhere` chunk if that run wrote it (per model:
    the models whose stores are free go ahead). `decoding` names the video decoder
    (`plstitch_eval.data.decoders`); with a frame `cache` (`--frames`) frames are read from there instead.
    """

    def __init__(
        self,
        jobs: Sequence[VideoJob],
        plan: FramePlan | Sequence[FramePlan],
        batch_size: int,
        store_root: Path | Sequence[Path | None] | None = None,
        decoding: Decoding = PYAV,
        cache: FrameCache | None = None,
    ) -> None:
        self.jobs = list(jobs)
        self.decoding = decoding
        self.cache = cache
        self.largest_first = sorted(self.jobs, key=_job_size, reverse=True)
        self.plans = (plan,) if isinstance(plan, FramePlan) else tuple(plan)
        self.plan = self.plans[0]
        self.batch_size = batch_size
        roots = store_root if isinstance(store_root, (list, tuple)) else [store_root] * len(self.plans)
        self.store_roots = tuple(None if r is None else Path(r) for r in roots)
        self.next_job = multiprocessing.Value("q", 0)  # shared with forked or spawned workers
        self.slot = {job.index: i for i, job in enumerate(self.jobs)}
        n_models = len(self.plans)  # set by the main process, per (video, model)
        self.written = multiprocessing.RawArray("b", max(1, len(self.jobs) * n_models))

    @property
    def store_root(self) -> Path | None:
        """The first model's store (the store of a one-model run)."""
        return self.store_roots[0]

    def _claim(self) -> int:
        with self.next_job.get_lock():
            index = self.next_job.value
            self.next_job.value += 1
        return index

    def _written_slot(self, video_index: int, model: int) -> int:
        return self.slot[video_index] * len(self.plans) + model

    def mark_written(self, video_index: int, model: int = 0) -> None:
        """Called by the main process once a video is written (or failed) for `model`: its claim may be
        given back."""
        if video_index in self.slot:
            self.written[self._written_slot(video_index, model)] = 1

    def is_written(self, video_index: int, model: int) -> bool:
        """True once the main process has written (or failed) `video_index` for `model`."""
        return bool(self.written[self._written_slot(video_index, model)])

    def _chunks(self, job: VideoJob, threads: int) -> Iterator[FrameChunk]:
        plans = [self.plans[m] for m in job.models]
        return iter_shared_chunks(job, plans, self.batch_size, threads, self.decoding, self.cache)

    def __iter__(self) -> Iterator[FrameChunk]:
        info = get_worker_info()
        threads = decode_threads(0 if info is None else info.num_workers)
        jobs = self.jobs if info is None else self.largest_first
        claims = _Claims(self)
        try:
            put_off: list[VideoJob] = []
            while (index := self._claim()) < len(jobs):
                job = jobs[index]
                states = claims.take(job)
                for model in _having(states, "elsewhere"):
                    yield note_chunk(job, elsewhere=True, model=model)
                if busy := _having(states, "busy"):
                    put_off.append(job.for_models(busy))
                if taken := _having(states, "taken"):
                    yield from self._chunks(job.for_models(taken), threads)
            for job in put_off:  # held by another run: wait until it lets go, then skip or take the video
                states = claims.take(job)
                for model in _having(states, "busy"):
                    yield note_chunk(job, waiting=True, model=model)
                while busy := _having(states, "busy"):
                    time.sleep(CLAIM_POLL_SECONDS)
                    states = {**states, **claims.take(job.for_models(busy))}
                for model in _having(states, "elsewhere"):
                    yield note_chunk(job, elsewhere=True, model=model)
                if taken := _having(states, "taken"):
                    yield from self._chunks(job.for_models(taken), threads)
            claims.wait_until_written()
        finally:
            claims.release_all()


def _having(states: dict[int, str], state: str) -> tuple[int, ...]:
    """The models (in job order) whose claim came back as `state`."""
    return tuple(model for model, value in states.items() if value == state)


class _Claims:
    """The video claims a decoding process holds, per (video, model), each given back once the main process
    wrote that model's video."""

    def __init__(self, stream: VideoFrameStream) -> None:
        self.stream = stream
        self.held: dict[tuple[int, int], VideoClaim] = {}  # (video index, model) -> claim
        # in a decoding worker: the main process, which marks videos written (None in the main process)
        self.parent = os.getppid() if get_worker_info() is not None else None

    def take(self, job: VideoJob) -> dict[int, str]:
        """Claim `job`'s video in each of its models' stores: per model `taken` (decode it), `busy` (another
        run holds it) or `elsewhere` (another run wrote it since this run was planned)."""
        self.release_written()
        return {model: self._take_one(job, model) for model in job.models}

    def _take_one(self, job: VideoJob, model: int) -> str:
        root = self.stream.store_roots[model]
        if root is None or job.video is None:
            return "taken"
        claim = claim_video(root, job.video)
        if claim is None:
            return "busy"
        state = file_state(FeatureStore(root).path(job.video))
        if state is not None and state != job.state_of(model):
            claim.release()
            return "elsewhere"
        self.held[(job.index, model)] = claim
        return "taken"

    def release_written(self) -> None:
        """Give back the claims of videos the main process has written."""
        for key in [k for k in self.held if self.stream.is_written(*k)]:
            self.held.pop(key).release()

    def wait_until_written(self) -> None:
        """Hold the last claims until their videos are written (released sooner, another run would redo
        them); a worker whose main process died stops waiting, so that its claims die with the run."""
        while self.held:
            self.release_written()
            if self.parent is not None and os.getppid() != self.parent:
                return  # the main process is gone (kill -9): nothing will be written; give the claims back
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
    plan: FramePlan | Sequence[FramePlan],
    batch_size: int,
    num_workers: int,
    device: torch.device,
    store_root: Path | Sequence[Path | None] | None = None,
    decoding: Decoding = PYAV,
    cache: FrameCache | None = None,
) -> DataLoader:
    """DataLoader over whole-video decoding jobs; chunks are already batched, so `batch_size=None`. With
    `store_root`, videos are claimed in that store (see `VideoFrameStream`; one plan and store per model for
    a pass over several models). Decoding on CUDA runs in the
    main process (no workers: CUDA does not cross a fork) and its chunks are already on the device."""
    workers = 0 if decoding.on_cuda else max(0, min(num_workers, len(jobs)))
    init = _cpu_worker_init if device.type == "cpu" else _worker_init
    return DataLoader(
        VideoFrameStream(jobs, plan, batch_size, store_root, decoding, cache),
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
