"""Decode once (issue 43), measured side by side in one run: `python benchmarks/extract.py --part many`.

Several encoders in one pass (`extract_many`: each video decoded once, each model its own preprocessing and
store) against
1. the same encoders extracted one after the other (`extract_features` per model: N decodes), and
2. the floor of one pass: one decode of the sampled frames into every model's crops (the pass's own decoding
   workers and chunker, no model, no store) plus each model's forwards on ready crops of those frames
   (normalise + forward, batched as extraction does).
3. the same pass reading a frame cache (`write-lmdb --eval-frames`, JPEG q90, written before the clock) in
   place of the videos.
Rounds are interleaved (pass, one by one, floor, cache pass, ...) and the median round is shown; target: the
pass reaches >= 0.9 of its floor (floor seconds / pass seconds; above 1 is possible, the pass overlaps
decoding and forwards). Default models are the shipped tiny ones (no download): a whole-frame 224 ViT, a
centre-crop ViT and raw pixels, three preprocessing kinds.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.extract import (
    ExtractOptions,
    ExtractTarget,
    VideoJob,
    default_workers,
    extract_features,
    extract_many,
)
from plstitch_eval.extract.loader import VideoFrameStream
from plstitch_eval.hub import load_encoder
from plstitch_eval.preprocess import frame_plan, normalize_crops
from plstitch_train.frames_lmdb import write_frames_lmdb
from plstitch_train.videos import TrainingVideo

TARGET = 0.9


@dataclass
class ManyRow:
    """The N-encoder pass against N one-model runs and against its floor (seconds, median round)."""

    models: list[str]
    videos: int
    frames: int
    pass_seconds: float
    one_by_one_seconds: float
    floor_seconds: float
    decode_seconds: float
    forward_seconds: dict[str, float]
    cache_pass_seconds: float
    cache_write_seconds: float
    speedup: float  # one by one / pass
    cache_speedup: float  # pass from video / pass from the cache
    ratio: float  # floor / pass
    target: float
    all_ratios: list[float]


def _options(args: argparse.Namespace, workers: int) -> ExtractOptions:
    return ExtractOptions(
        fps=1.0,
        batch_size=args.batch_size,
        num_workers=workers,
        device=args.device,
        precision="fp32" if args.device == "cpu" else "auto",
        progress=False,
    )


def _decode_only(adapter: Any, plans: list[Any], options: ExtractOptions, workers: int) -> tuple[float, int]:
    """Seconds to decode the sampled frames of every video once into each model's crops, with the pass's
    workers and chunker, no model and no store; and the frames per model."""
    models = tuple(range(len(plans)))
    jobs = [VideoJob(i, Path(r.source), r.folder_fps, models=models) for i, r in enumerate(adapter.videos())]
    stream = VideoFrameStream(jobs, plans, options.batch_size)
    loader = DataLoader(stream, batch_size=None, num_workers=min(workers, len(jobs)))
    start, frames = time.perf_counter(), 0
    for chunk in loader:
        frames += len(chunk.images) if chunk.model == 0 else 0
    return time.perf_counter() - start, frames


def _forwards(encoder: Any, frames: int, batch_size: int, device: torch.device) -> float:
    """Seconds of normalise + forward on `frames` ready uint8 crops, in extraction's batches."""
    plan = frame_plan(encoder.data_config, 1.0)
    images = torch.randint(0, 256, (batch_size, 3, *plan.crop), dtype=torch.uint8, device=device)
    with torch.inference_mode():
        encoder(normalize_crops(images[:1], plan))  # warm-up
        start = time.perf_counter()
        for done in range(0, frames, batch_size):
            encoder(normalize_crops(images[: min(batch_size, frames - done)], plan)).float().cpu()
    return time.perf_counter() - start


def many_rows(root: Path, args: argparse.Namespace) -> list[ManyRow]:
    """The pass, one by one and the floor, interleaved over `args.repeats` rounds."""
    device = torch.device(args.device)
    names = [m for m in args.many_models.split(",") if m]
    encoders = {name: load_encoder(name, device=args.device) for name in names}
    adapter = get_dataset("cholec80", root=root)
    workers = default_workers(device) if args.num_workers is None else args.num_workers
    options = _options(args, workers)
    plans = [frame_plan(enc.data_config, 1.0) for enc in encoders.values()]
    rounds: list[tuple[float, float, float, float, dict[str, float], int, float]] = []
    with tempfile.TemporaryDirectory(prefix="plstitch-many-") as tmp:
        start = time.perf_counter()
        cache = Path(tmp) / "frames.lmdb"
        videos = [TrainingVideo(r.name, Path(r.source), r.folder_fps) for r in adapter.videos()]
        write_frames_lmdb(videos, cache, 1.0, None, source=f"cholec80:{root}:")
        cache_write_s = time.perf_counter() - start
        cached = replace(options, frames=cache)
        for repeat in range(args.repeats):
            out = Path(tmp) / f"round{repeat}"
            start = time.perf_counter()
            targets = [ExtractTarget(enc, out / "pass" / name, name) for name, enc in encoders.items()]
            summary = extract_many(adapter, targets, options)
            pass_s = time.perf_counter() - start
            if not summary.ok:
                raise SystemExit(f"extraction failed: {summary.failed}")
            start = time.perf_counter()
            for name, encoder in encoders.items():
                extract_features(adapter, encoder, out / "one" / name, options)
            one_s = time.perf_counter() - start
            decode_s, frames = _decode_only(adapter, plans, options, workers)
            forward = {
                name: _forwards(enc, frames, args.batch_size, device) for name, enc in encoders.items()
            }
            floor_s = decode_s + sum(forward.values())
            start = time.perf_counter()
            targets = [ExtractTarget(enc, out / "cache" / name, name) for name, enc in encoders.items()]
            extract_many(adapter, targets, cached)
            cache_s = time.perf_counter() - start
            rounds.append((pass_s, one_s, floor_s, decode_s, forward, frames, cache_s))
    ratios = [floor / pass_s for pass_s, _, floor, *_ in rounds]
    median = sorted(range(len(rounds)), key=lambda i: ratios[i])[len(rounds) // 2]
    pass_s, one_s, floor_s, decode_s, forward, frames, cache_s = rounds[median]
    row = ManyRow(
        names,
        len(adapter.videos()),
        frames,
        round(pass_s, 3),
        round(one_s, 3),
        round(floor_s, 3),
        round(decode_s, 3),
        {k: round(v, 3) for k, v in forward.items()},
        round(cache_s, 3),
        round(cache_write_s, 3),
        round(one_s / pass_s, 3),
        round(pass_s / cache_s, 3),
        round(ratios[median], 3),
        TARGET,
        [round(r, 3) for r in ratios],
    )
    return [row]


def print_many_rows(rows: list[ManyRow], args: argparse.Namespace) -> None:
    """One line per row: the pass, one by one, the floor, and the two ratios."""
    print(
        f"several encoders in one pass: {args.videos} x {args.seconds} s {args.width}x{args.height} H.264 at "
        f"25 fps sampled at 1 fps, device {args.device}, batch {args.batch_size}, "
        f"{torch.get_num_threads()} torch threads, median of {args.repeats} interleaved rounds"
    )
    for r in rows:
        print(f"models: {', '.join(r.models)}; {r.frames} frames per model")
        forwards = " + ".join(f"{v:.2f}" for v in r.forward_seconds.values())
        print(
            f"  one pass {r.pass_seconds:.2f} s | one by one {r.one_by_one_seconds:.2f} s "
            f"(pass {r.speedup:.2f}x faster) | floor {r.floor_seconds:.2f} s = "
            f"decode {r.decode_seconds:.2f} s + forwards {forwards} s"
        )
        print(
            f"  from the frame cache {r.cache_pass_seconds:.2f} s ({r.cache_speedup:.2f}x the pass from "
            f"video; cache written once in {r.cache_write_seconds:.2f} s)"
        )
        runs = ", ".join(f"{x:.2f}" for x in r.all_ratios)
        verdict = "ok" if r.ratio >= r.target else "BELOW"
        print(f"  floor / pass {r.ratio:.2f} >= {r.target} {verdict}  (runs: {runs})")
