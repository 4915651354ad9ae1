"""`extract_features`: a dataset's videos through an encoder into a resumable feature store, end to end.

The run: open the store (rank 0, `store`), take this rank's share (`sharding`), skip what the store holds,
decode in workers (`loader`), encode and write per video (`encode`), then merge every rank's results
(`summary`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from rich.progress import TextColumn
from rich.text import Text

from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord, get_dataset
from plstitch_eval.data.decoders import Decoding
from plstitch_eval.data.frames_lmdb import FrameCache
from plstitch_eval.errors import ConfigError, FeatureStoreError
from plstitch_eval.extract.chunks import VideoJob
from plstitch_eval.extract.encode import EncodeLoop
from plstitch_eval.extract.loader import default_workers, make_loader, run_decoding
from plstitch_eval.extract.options import ExtractOptions, ExtractTarget, check_redo, select_videos
from plstitch_eval.extract.sharding import broadcast_error, gather_results, my_share
from plstitch_eval.extract.shared import decode_key
from plstitch_eval.extract.store import build_manifest, check_out_folder, open_store, plan_videos
from plstitch_eval.extract.summary import ELSEWHERE, ExtractSummary, MultiExtractSummary, VideoResult
from plstitch_eval.hub import load_encoder
from plstitch_eval.preprocess import frame_plan
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.utils.console import console, logger, progress_bar
from plstitch_eval.utils.device import resolve_device, resolve_precision
from plstitch_eval.utils.distributed import DistInfo, init_distributed, teardown_distributed


def _resolve_dataset(dataset: DatasetAdapter | str, root: str | Path | None) -> DatasetAdapter:
    """An adapter as given, or built from its registry name and `root`."""
    return get_dataset(dataset, root=root) if isinstance(dataset, str) else dataset


def _resolve_encoder(encoder: Any, device: torch.device) -> Any:
    """An Encoder moved to `device` in eval mode, loading it first when given as a spec."""
    if isinstance(encoder, (str, Path)):
        return load_encoder(str(encoder), device=str(device))
    return encoder.to(device).eval()


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
    target = ExtractTarget(encoder, Path(out))
    return _run(dataset, [target], options, root, on_video_done).stores[0]


def extract_many(
    dataset: DatasetAdapter | str,
    targets: Sequence[ExtractTarget],
    options: ExtractOptions | None = None,
    *,
    root: str | Path | None = None,
    on_video_done: Callable[[VideoResult], None] | None = None,
) -> MultiExtractSummary:
    """`extract_features` for several encoders at once, each into its own store, decoding each video once.

    Models that share the decoder, its device, the fps and the decode size take their frames from one
    decoding pass (`shared.iter_shared_chunks`), each with its own preprocessing; every store is the one a
    one-model run writes (same features, same manifest apart from its times). A video is decoded while some
    model's store still lacks it, for those models only.
    """
    if not targets:
        raise ConfigError("extract_many needs at least one model.")
    outs = [Path(t.out).resolve() for t in targets]
    if len(set(outs)) != len(outs):
        raise ConfigError("Two models of one extraction write to the same store folder; give each its own.")
    return _run(dataset, targets, options, root, on_video_done)


def _run(
    dataset: DatasetAdapter | str,
    targets: Sequence[ExtractTarget],
    options: ExtractOptions | None,
    root: str | Path | None,
    on_video_done: Callable[[VideoResult], None] | None,
) -> MultiExtractSummary:
    """Check the inputs, start torch.distributed when under torchrun, load the encoders, run the pass."""
    options = options if options is not None else ExtractOptions()
    start = time.perf_counter()
    adapter = _resolve_dataset(dataset, root)
    records = select_videos(adapter, options.split, options.videos, options.split_scheme)
    check_redo(records, options.redo)
    cache = open_frame_cache(options, adapter, records)
    for target in targets:
        check_out_folder(Path(target.out), options.overwrite)
    dist_info, torch_device = init_distributed(resolve_device(options.device))
    try:
        models = [_Model(_resolve_encoder(t.encoder, torch_device), Path(t.out), t.name) for t in targets]
        precision = resolve_precision(options.precision, torch_device)
        stores = _extract(
            adapter, records, models, options, torch_device, precision, dist_info, on_video_done, cache
        )
    finally:
        teardown_distributed(dist_info)
    seconds = time.perf_counter() - start
    for summary in stores:
        summary.seconds = seconds
    names = [t.name or str(t.out) for t in targets]
    return MultiExtractSummary(stores, names, seconds, dist_info.world_size, dist_info.rank)


@dataclass
class _Model:
    """One encoder of a run, its store folder and (in a run over several) its name."""

    encoder: Any
    out: Path
    name: str | None = None
    plan: Any = None
    decoding: Decoding | None = None
    store: FeatureStore | None = None
    results: dict[int, VideoResult] = field(default_factory=dict)


def _extract(
    adapter: DatasetAdapter,
    records: list[VideoRecord],
    models: list[_Model],
    options: ExtractOptions,
    device: torch.device,
    precision: str,
    dist_info: DistInfo,
    on_video_done: Callable[[VideoResult], None] | None,
    cache: FrameCache | None = None,
) -> list[ExtractSummary]:
    """The run itself: open each store, shard, decode in workers (once per video for the models sharing a
    decoding pass; from a frame cache when given), encode in batches, write per video and model."""
    fps = run_fps(options, adapter)
    sources = [r.source for r in records]
    for i, model in enumerate(models):
        clip = getattr(model.encoder, "clip", None)
        model.plan = frame_plan(
            model.encoder.data_config, fps, options.resize_on_decode, clip, options.crop_black_margin
        )
        if cache is not None:
            if clip is not None:
                raise ConfigError(
                    f"{model.name or 'the model'} is a clip encoder: its windows need every frame of the "
                    f"video, a frame cache holds {cache.fps:g} fps; extract it from the videos (no --frames)."
                )
            model.decoding = cache_decoding(options, device, cache)
            continue
        first = models[0].decoding
        announce = dist_info.rank == 0 and (
            i == 0 or clip is not None and first is not None and first.on_cuda
        )
        model.decoding = run_decoding(
            options.decoder, options.decode_device, device, model.plan, sources, announce
        )

    # Rank 0 creates (or validates) each store and writes its manifest before any video, so that a killed
    # run is resumable; the other ranks wait for it and then open the same folders.
    setup_error: str | None = None
    if dist_info.rank == 0:
        try:
            for model in models:
                frames = cache.record() if cache is not None else None
                manifest = build_manifest(
                    adapter, model.encoder, model.plan, precision, model.decoding, frames
                )
                model.store = open_store(model.out, manifest, options.overwrite)
        except FeatureStoreError as exc:
            if not dist_info.active:
                raise
            setup_error = str(exc)
    broadcast_error(dist_info, setup_error)
    mine = my_share(len(records), dist_info)
    jobs_of: list[list[VideoJob]] = []
    for model in models:
        model.store = model.store or FeatureStore(model.out)
        model.results, jobs = plan_videos(model.store, records, mine, options.redo or ())
        jobs_of.append(jobs)

    num_workers = default_workers(device) if options.num_workers is None else options.num_workers
    columns = (TextColumn("{task.fields[frames]} frames"), TextColumn("{task.fields[rate]:.1f} frames/s"))
    progress = options.progress and dist_info.rank == 0
    total = len(mine) * len(models)
    label = "extract" if len(models) == 1 else f"extract ({len(models)} models)"
    started, frames = time.perf_counter(), 0
    with progress_bar(*columns, disable=not progress) as bar:
        done = sum(len(m.results) for m in models)
        task = bar.add_task(label, total=total, completed=done, frames=0, rate=0.0)
        for group in _passes(models):
            jobs = _group_jobs([jobs_of[m] for m in group])
            if not jobs:
                continue
            members = [models[m] for m in group]
            loops = [
                EncodeLoop(m.store, records, m.encoder, m.plan, device, precision, model=k)
                for k, m in enumerate(members)
            ]
            plans = [m.plan for m in members]
            roots = [m.store.root for m in members]
            decoding = members[0].decoding
            if len(members) == 1:  # a one-model run, exactly as it has always been
                plans, roots = plans[0], roots[0]
            loader = make_loader(jobs, plans, options.batch_size, num_workers, device, roots, decoding, cache)
            for chunk in loader:
                loop = loops[chunk.model]
                before = loop.frames
                result = loop.take(chunk, loader.dataset, options.fail_fast)
                frames += loop.frames - before
                if result is None:
                    continue
                member = members[chunk.model]
                member.results[loop.index_of[result.video]] = result
                elapsed = time.perf_counter() - started
                bar.update(task, advance=1, frames=frames, rate=frames / elapsed if elapsed else 0.0)
                where = f" ({member.name})" if len(models) > 1 and member.name else ""
                if result.status == "failed":
                    logger.error("video %s%s failed: %s", result.video, where, result.error)
                    continue
                if result.note == ELSEWHERE:
                    console.print(Text(f"{result.video}{where}: {ELSEWHERE}"), soft_wrap=True)
                if on_video_done is not None:
                    on_video_done(result)

    order = {r.name: i for i, r in enumerate(records)}
    summaries = []
    for model in models:
        all_results = gather_results(dist_info, [model.results[i] for i in mine])
        all_results.sort(key=lambda r: order[r.video])
        summaries.append(
            ExtractSummary(model.out, all_results, 0.0, world_size=dist_info.world_size, rank=dist_info.rank)
        )
    if dist_info.active:
        dist.barrier()
    return summaries


def run_fps(options: ExtractOptions, adapter: DatasetAdapter) -> float:
    """The fps a run samples at: `options.fps`, else the dataset's evaluation fps."""
    return float(options.fps) if options.fps is not None else float(adapter.eval_fps)


def open_frame_cache(
    options: ExtractOptions, adapter: DatasetAdapter, records: list[VideoRecord]
) -> FrameCache | None:
    """The frame cache of `--frames`, checked against the run (its fps, every selected video) before any
    model loads; None without one."""
    if options.frames is None:
        return None
    cache = FrameCache.open(options.frames)
    cache.check([r.name for r in records], run_fps(options, adapter))
    return cache


def cache_decoding(
    options: ExtractOptions, device: torch.device, cache: FrameCache | None = None
) -> Decoding:
    """Where a frame cache's frames are decoded: JPEGs with nvJPEG on the model's CUDA device (batched, in the
    main process); on the CPU in decoding workers when the model is there, `--decode-device cpu` says so or
    the cache is lossless (PNG: nvJPEG cannot read it, and workers decode and resize exactly as the video
    path does on the CPU)."""
    lossless = cache is not None and cache.lossless
    on_cuda = device.type == "cuda" and options.decode_device != "cpu" and not lossless
    return Decoding("pyav", str(device) if on_cuda else "cpu")


def _passes(models: list[_Model]) -> list[list[int]]:
    """The models (positions) that share one decoding pass: the same decoder, device and `decode_key`."""
    groups: dict[tuple[Any, ...], list[int]] = {}
    for i, model in enumerate(models):
        groups.setdefault((model.decoding, decode_key(model.plan)), []).append(i)
    return list(groups.values())


def _group_jobs(jobs_per_model: list[list[VideoJob]]) -> list[VideoJob]:
    """One job per video some model of a pass still needs, naming those models (their positions in the
    pass) and each one's planned store-file state; a one-model pass keeps its jobs as they are."""
    if len(jobs_per_model) == 1:
        return jobs_per_model[0]
    by_video: dict[int, list[tuple[int, VideoJob]]] = {}
    for k, jobs in enumerate(jobs_per_model):
        for job in jobs:
            by_video.setdefault(job.index, []).append((k, job))
    merged = []
    for index in sorted(by_video):
        entries = by_video[index]
        first = entries[0][1]
        merged.append(
            replace(
                first,
                seen=None,
                models=tuple(k for k, _ in entries),
                seen_by=tuple(job.seen for _, job in entries),
            )
        )
    return merged
