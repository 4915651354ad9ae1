"""Training frame stores: the JPEG LMDB against the raw uint8 cache, and the loader against the training step.

1. Size: H.264 videos (854x480, 25 fps, drifting textured content with noise, `extract.py`'s source) decoded
   at 1 fps with shorter side 256 (the training default) into both stores; bytes LMDB / bytes raw cache, and
   the milliseconds to read one frame from each (what GPU JPEG decoding could at most take off a worker).
2. Speed at the `tiny-cpu` preset (64 px, 2 fps), both stores from the same videos: items/s the trainer's
   DataLoader delivers with 0, 1 and 2 workers, and a training loop with workers timing how long each step
   waits for its batch (target: < 5 % with workers). Items/s the step consumes = batch / compute seconds.

    python benchmarks/frame_store.py [--videos 4] [--seconds 60] [--steps 8] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from extract import make_mp4s
from torch.utils.data import DataLoader
from train_step import measure

from plstitch_train.data import build_training_data, open_frame_store
from plstitch_train.model import PLStitchModel
from plstitch_train.presets import TrainConfig, get_preset


def store_bytes(path: Path) -> int:
    """Bytes on disk under `path` (a raw cache folder of .npy files, or an LMDB folder)."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def loader_items_per_s(config: TrainConfig, store, workers: int, batches: int) -> float:
    """Items/s the trainer's DataLoader yields over `batches` batches, timed from starting its workers.

    Why from the start: workers prefetch, so timing after the first batch would count prefetched batches free.
    """
    model = PLStitchModel(config)
    dataset, sampler = build_training_data(config, store, model.student["backbone"].grid_size)
    tick = time.perf_counter()
    loader = iter(DataLoader(dataset, batch_sampler=sampler, num_workers=workers))
    items = sum(len(next(loader)["masks"]) for _ in range(batches))
    return items / (time.perf_counter() - tick)


def read_ms_per_frame(store, frames: int = 200) -> float:
    """Milliseconds to read one frame of `store` (LMDB: lookup + JPEG decoding), cycling its videos."""
    tick = time.perf_counter()
    for i in range(frames):
        video = i % len(store)
        store.frames(video, [i * 7 % store.lengths[video]])
    return 1000 * (time.perf_counter() - tick) / frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--videos", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        root = make_mp4s(Path(tmp) / "videos", args.videos, args.seconds, 480, 854)
        data = str(root / "videos")
        size = {}
        for kind in ("raw", "lmdb"):
            cache = Path(tmp) / f"size-{kind}"
            tick = time.perf_counter()
            store = open_frame_store(TrainConfig(data=data, fps=1.0, frame_size=256, frame_store=kind), cache)
            written = time.perf_counter() - tick
            size[kind] = {
                "bytes": store_bytes(cache),
                "write_s": written,
                "read_ms": read_ms_per_frame(store),
            }
        tiny = get_preset("tiny-cpu").replace(data=data)
        speed = {}
        for kind in ("raw", "lmdb"):
            config = tiny.replace(frame_store=kind)
            store = open_frame_store(config, Path(tmp) / f"tiny-{kind}")
            speed[kind] = {
                f"loader_items_per_s_{w}_workers": loader_items_per_s(config, store, w, args.batches)
                for w in (0, 1, 2)
            }
            for workers in (1, 2):
                step = measure(config.replace(num_workers=workers), store, args.steps)
                consumed = config.batch_size / (step["s_per_step"] * (1 - step["data_wait_fraction"]))
                speed[kind][f"step_{workers}_workers"] = {**step, "items_per_s_consumed": consumed}
    ratio = size["lmdb"]["bytes"] / size["raw"]["bytes"]
    print(f"size at 256 px, 1 fps: LMDB (JPEG q90) / raw cache = {ratio:.3f}")
    print(
        f"one 256 px frame read: LMDB {size['lmdb']['read_ms']:.2f} ms (lookup + JPEG decoding), "
        f"raw {size['raw']['read_ms']:.2f} ms"
    )
    for kind, row in speed.items():
        loader = ", ".join(f"{w} workers {row[f'loader_items_per_s_{w}_workers']:.0f}" for w in (0, 1, 2))
        print(f"{kind:>4}: loader items/s: {loader}")
        for workers in (1, 2):
            step = row[f"step_{workers}_workers"]
            print(
                f"{kind:>4}: step with {workers} worker(s): {step['s_per_step']:.3f} s, consumes "
                f"{step['items_per_s_consumed']:.0f} items/s, waits on data {step['data_wait_fraction']:.1%}"
                " (target < 5 %)"
            )
    print(json.dumps({"threads": args.threads, "size": size, "size_ratio": ratio, "speed": speed}))


if __name__ == "__main__":
    main()
