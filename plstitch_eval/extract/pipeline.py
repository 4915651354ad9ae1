"""`extract_features`: a dataset's videos through an encoder into a resumable feature store, end to end.

The run: open the store (rank 0, `store`), take this rank's share (`sharding`), skip what the store holds,
decode in workers (`loader`), encode and write per video (`encode`), then merge every rank's results
(`summary`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from rich.progress import TextColumn
from rich.text import Text

from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord, get_dataset
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract.encode import EncodeLoop
from plstitch_eval.extract.loader import default_workers, make_loader, run_decoding
from plstitch_eval.extract.options import ExtractOptions, select_videos
from plstitch_eval.extract.sharding import broadcast_error, gather_results, my_share
from plstitch_eval.extract.store import build_manifest, check_out_folder, open_store, plan_videos
from plstitch_eval.extract.summary import ELSEWHERE, ExtractSummary, VideoResult
from plstitch_eval.features import FeatureStore
from plstitch_eval.hub import load_encoder
from plstitch_eval.preprocess import frame_plan
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
    broadcast_error(dist_info, setup_error)
    store = store or FeatureStore(out)

    mine = my_share(len(records), dist_info)
    results, jobs = plan_videos(store, records, mine)

    num_workers = default_workers(device) if options.num_workers is None else options.num_workers
    columns = (TextColumn("{task.fields[frames]} frames"), TextColumn("{task.fields[rate]:.1f} frames/s"))
    progress = options.progress and dist_info.rank == 0
    with progress_bar(*columns, disable=not progress) as bar:
        task = bar.add_task("extract", total=len(mine), completed=len(results), frames=0, rate=0.0)
        if jobs:
            loader = make_loader(jobs, plan, options.batch_size, num_workers, device, store.root, decoding)
            run = EncodeLoop(store, records, encoder, plan, device, precision)
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

    all_results = gather_results(dist_info, [results[i] for i in mine])
    order = {r.name: i for i, r in enumerate(records)}
    all_results.sort(key=lambda r: order[r.video])
    if dist_info.active:
        dist.barrier()
    return ExtractSummary(out, all_results, 0.0, world_size=dist_info.world_size, rank=dist_info.rank)
