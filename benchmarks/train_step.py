"""Training step cost at the tiny preset: full objective (L_vid + L_MIM + L_jigsaw) vs MIM only.

Prints, per setting, the measured seconds per optimizer step, the FLOPs of one forward+backward
(torch.utils.flop_counter.FlopCounterMode) and the fraction of step time spent waiting for the DataLoader,
then the full/MIM-only ratio measured next to the FLOP-estimated ratio. The dataset and sampler come from
the trainer's own builder (`plstitch_train.data.build_training_data`); only the frames are synthetic.

    python benchmarks/train_step.py [--steps 6] [--batch-size 16] [--num-workers 0] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch.utils.data import DataLoader
from torch.utils.flop_counter import FlopCounterMode

from plstitch_train.data import FrameStore, build_training_data
from plstitch_train.model import PLStitchModel
from plstitch_train.presets import TrainConfig, get_preset

SETTINGS = {
    "full": {},
    "mim-only": {"lambda_vid": 0.0, "lambda_jigsaw": 0.0},
    "vid-only": {"lambda_mim": 0.0, "lambda_jigsaw": 0.0},
}


def synthetic_store(n_videos: int = 4, n_frames: int = 120, size: int = 64) -> FrameStore:
    """In-memory uint8 videos whose content drifts with time (no decoding in the measurement)."""
    rng = np.random.default_rng(0)
    arrays = []
    for _ in range(n_videos):
        base = rng.integers(0, 200, size=(size, size, 3)).astype(np.int32)
        ramp = np.arange(n_frames).reshape(-1, 1, 1, 1) // 3
        arrays.append((base[None] + ramp).clip(0, 255).astype(np.uint8))
    return FrameStore([f"v{i}" for i in range(n_videos)], arrays, fps=2.0)


def make_loader(config: TrainConfig, store: FrameStore, model: PLStitchModel) -> DataLoader:
    """The trainer's dataset and sampler for `config` (one process) in a plain DataLoader."""
    dataset, sampler = build_training_data(config, store, model.student["backbone"].grid_size)
    return DataLoader(dataset, batch_sampler=sampler, num_workers=config.run.num_workers)


def step_flops(model: PLStitchModel, batch: dict[str, torch.Tensor]) -> int:
    """FLOPs of one forward + backward on `batch`."""
    counter = FlopCounterMode(display=False)
    with counter:
        model(batch)["loss"].backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def measure(config: TrainConfig, store: FrameStore, steps: int, warmup: int = 1) -> dict[str, float]:
    """Seconds per optimizer step, data-wait fraction and GFLOPs per step for `config`."""
    torch.manual_seed(0)
    model = PLStitchModel(config).train()
    optimizer = torch.optim.AdamW([p for g in model.param_groups() for p in g["params"]], lr=1e-4)
    batches = iter(make_loader(config, store, model))
    flops = step_flops(model, next(batches))
    wait = total = 0.0
    for i in range(warmup + steps):
        tick = time.perf_counter()
        batch = next(batches)
        fetched = time.perf_counter()
        loss = model(batch)["loss"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        model.update_teacher(0.996)
        if i >= warmup:
            wait += fetched - tick
            total += time.perf_counter() - tick
    return {"s_per_step": total / steps, "data_wait_fraction": wait / total, "gflops_per_step": flops / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    base = get_preset("tiny-cpu").replace(data="-", batch_size=args.batch_size, num_workers=args.num_workers)
    store = synthetic_store(size=base.frames.frame_size)
    results = {
        name: measure(base.replace(**changes), store, args.steps) for name, changes in SETTINGS.items()
    }
    print(f"{'setting':<10} {'s/step':>8} {'GFLOP/step':>11} {'data wait':>10}")
    for name, r in results.items():
        wait = r["data_wait_fraction"]
        print(f"{name:<10} {r['s_per_step']:>8.3f} {r['gflops_per_step']:>11.2f} {wait:>9.1%}")
    full, mim = results["full"], results["mim-only"]
    print(
        f"full / MIM-only: measured {full['s_per_step'] / mim['s_per_step']:.2f}x, "
        f"FLOP-estimated {full['gflops_per_step'] / mim['gflops_per_step']:.2f}x"
    )
    print(json.dumps({"batch_size": args.batch_size, "threads": args.threads, "results": results}))


if __name__ == "__main__":
    main()
