"""Decode once on a GPU (issue 43): `python benchmarks/gpu.py --parts passes` (part of benchmarks/gpu.py).

Several encoders in one pass (`extract_many`), end to end, against the sum of their forward-only floors (the
same normalise + forward on uint8 batches already on the device, per model): from video with PyAV on the CPU
workers, from video with PyAV's NVDEC, and from a frame cache (`write-lmdb --eval-frames`, JPEG decoded
batched with nvJPEG), for one encoder and for `--pass-models` encoders. The cache is written before the clock
(its writing time is reported). Targets: from the cache >= 0.8 of the floor, one encoder or N; from video:
report what each reaches. Rounds are interleaved after a warm-up; the median is shown.

Runs on the CPU as well (`device="cpu"`; tests/benchmarks/test_gpu.py runs it there with tiny models).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.pyav_cuda import nvdec_unavailable_reason
from plstitch_eval.extract import ExtractOptions, ExtractTarget, extract_many
from plstitch_eval.hub import Encoder
from plstitch_train.frames_lmdb import write_frames_lmdb
from plstitch_train.videos import TrainingVideo

CACHE_TARGET = 0.8
Floor = Callable[[Encoder, int, int, torch.device], float]  # (encoder, batch, frames, device) -> frames/s


def pass_encoders(make: Callable[[], Encoder], n: int) -> dict[str, Encoder]:
    """`n` encoders of the same network, every other one with the other crop mode (centre crop <-> whole
    frame), each its own copy: the same cost per frame, two preprocessing kinds, distinct stores."""
    encoders = {}
    for i in range(n):
        encoder = make()
        if i % 2:
            other = "center-crop" if encoder.data_config.crop_mode == "squash" else "whole-frame"
            encoder.data_config = encoder.data_config.with_transform(other)
        encoders[f"model{i}"] = encoder
    return encoders


def _run(adapter: Any, encoders: dict[str, Encoder], out: Path, options: ExtractOptions) -> tuple[float, int]:
    """(seconds, frames per model) of one `extract_many` pass into new stores."""
    targets = [ExtractTarget(enc, out / name, name) for name, enc in encoders.items()]
    start = time.perf_counter()
    summary = extract_many(adapter, targets, options)
    seconds = time.perf_counter() - start
    if not summary.ok:
        raise SystemExit(f"extraction failed: {summary.failed}")
    return seconds, summary.stores[0].frames


def passes_rows(
    root: Path,
    make_encoder: Callable[[], Encoder],
    floor: Floor,
    args: argparse.Namespace,
    device: torch.device,
) -> dict:
    """Each run's frames/s per model against the summed forward floors of its encoders."""
    adapter = get_dataset("cholec80", root=root)
    encoders = pass_encoders(make_encoder, args.pass_models)
    one = dict(list(encoders.items())[:1])
    start = time.perf_counter()
    cache = root.parent / "frames.lmdb"
    videos = [TrainingVideo(r.name, Path(r.source), r.folder_fps) for r in adapter.videos()]
    write_frames_lmdb(videos, cache, args.fps, None, source=f"cholec80:{root}:")
    cache_seconds = time.perf_counter() - start
    precision = "bf16" if device.type == "cuda" else "fp32"
    common = {"fps": args.fps, "batch_size": args.batch_size, "device": str(device), "precision": precision}
    runs: dict[str, tuple[dict[str, Encoder], ExtractOptions]] = {
        f"video, PyAV CPU workers, {len(encoders)} models": (
            encoders,
            ExtractOptions(**common, decode_device="cpu"),
        ),
    }
    reason = nvdec_unavailable_reason() if device.type == "cuda" else "the model is on the CPU"
    if reason is None:
        nvdec = ExtractOptions(**common, decode_device="cuda")
        runs[f"video, PyAV NVDEC, {len(encoders)} models"] = (encoders, nvdec)
    runs["cache, 1 model"] = (one, ExtractOptions(**common, frames=cache))
    runs[f"cache, {len(encoders)} models"] = (encoders, ExtractOptions(**common, frames=cache))
    measured: dict[str, list[tuple[float, int]]] = {name: [] for name in runs}
    floors: dict[str, list[float]] = {name: [] for name in encoders}
    with tempfile.TemporaryDirectory(prefix="plstitch-gpu-passes-") as tmp:
        first = [adapter.videos()[0].name]
        for index, (models, option) in enumerate(runs.values()):  # first-call costs are not throughput
            warm = ExtractOptions(**{**vars(option), "videos": first, "progress": False})
            _run(adapter, models, Path(tmp) / f"warm-{index}", warm)
        for repeat in range(args.repeats):
            for index, (name, (models, option)) in enumerate(runs.items()):
                quiet = ExtractOptions(**{**vars(option), "progress": False})
                measured[name].append(_run(adapter, models, Path(tmp) / f"run-{repeat}-{index}", quiet))
            frames = max(4 * args.batch_size, next(iter(measured.values()))[-1][1])
            for model, encoder in encoders.items():
                floors[model].append(floor(encoder, args.batch_size, frames, device))
    floor_fps = {model: float(np.median(values)) for model, values in floors.items()}
    rows = []
    for name, (models, _) in runs.items():
        summed = 1.0 / sum(1.0 / floor_fps[m] for m in models)  # frames/s of the models' forwards in turn
        rates = [frames / seconds for seconds, frames in measured[name]]
        rate = float(np.median(rates))
        target = CACHE_TARGET if name.startswith("cache") else None
        rows.append(
            {
                "run": name,
                "models": len(models),
                "frames_per_model": measured[name][0][1],
                "frames_per_second": rate,  # sampled frames per second, each through every model
                "forward_floor_frames_per_second": summed,
                "of_forward_floor": rate / summed,
                "target": target,
                "all_frames_per_second": rates,
            }
        )
    notes = {"nvdec": reason or "used", "cache_write_seconds": cache_seconds}
    return {"rows": rows, "forward_floor_frames_per_second": floor_fps, **notes}


def print_passes(result: dict, args: argparse.Namespace) -> None:
    """One line per run: frames/s (each frame through every model) against the summed forward floors."""
    print(
        f"decode once: {args.pass_models} encoders per pass, batch {args.batch_size}, {args.videos} x "
        f"{args.seconds} s 854x480 H.264 sampled at {args.fps:g} fps; frame cache written in "
        f"{result['cache_write_seconds']:.1f} s; NVDEC: {result['nvdec']}"
    )
    print(f"{'run':<36} {'frames/s':>9} {'floor f/s':>9} {'of floor':>8} target  rounds (frames/s)")
    for row in result["rows"]:
        runs = ", ".join(f"{x:.0f}" for x in row["all_frames_per_second"])
        target, ratio = row["target"], row["of_forward_floor"]
        verdict = "-" if target is None else f">={target} {'ok' if ratio >= target else 'BELOW'}"
        rate, floor = row["frames_per_second"], row["forward_floor_frames_per_second"]
        print(f"{row['run']:<36} {rate:>9.1f} {floor:>9.1f} {ratio:>8.2f} {verdict}  ({runs})")
