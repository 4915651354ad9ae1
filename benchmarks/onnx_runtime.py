"""onnxruntime against torch eager for a probe's encoder + head (`plstitch export-onnx`), side by side in one
run: the same prepared uint8 frames through `recognizer.onnx` (CPU execution provider) and through the torch
modules `predict` runs, at batch 1 and 32, best of `--repeats` interleaved rounds.

Prints per model and batch: torch ms, onnxruntime ms, speed-up (target >= 1.3x at batch 1 on CPU), and the
largest probability difference.

    python benchmarks/onnx_runtime.py                         # the shipped tiny model and a random ViT-B/16
    python benchmarks/onnx_runtime.py --models tiny --repeats 20
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
from online import make_probe, random_vit_b  # benchmarks/online.py, beside this script

from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.predict import PredictOptions, load_probe_encoder
from plstitch_eval.predict.onnx import RECOGNIZER, export_onnx
from plstitch_eval.probes import load_probe

MODELS = {"tiny": "plstitch-tiny-synthetic", "vit-b16": None}  # None: a random ViT-B/16 timm folder


def measure(model, probe, session, frames: torch.Tensor, repeats: int) -> dict:
    """Fastest torch and onnxruntime times (ms) for one batch, interleaved rounds, and the largest
    probability difference."""
    array = frames.numpy()

    def run_torch():
        return probe.probabilities(model.encode(frames).numpy())

    def run_onnx():
        return session.run(None, {"frames": array})[1]

    run_torch(), run_onnx()  # warm up
    best = {"torch": float("inf"), "onnx": float("inf")}
    for _ in range(repeats):  # interleaved: both see the same load drift
        for name, fn in (("torch", run_torch), ("onnx", run_onnx)):
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], (time.perf_counter() - start) * 1000)
    diff = float(np.abs(run_torch() - run_onnx()).max())
    return {
        "torch_ms": round(best["torch"], 2),
        "onnxruntime_ms": round(best["onnx"], 2),
        "speedup": round(best["torch"] / best["onnx"], 2),
        "max_prob_diff": diff,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="tiny,vit-b16")
    parser.add_argument("--batches", default="1,32")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        short = {"n_videos": 1, "size": 64, "seed": 1, "min_seconds": 2.0, "max_seconds": 2.0}
        short["root"] = generate_synthetic(folder / "synthetic", workers=1, **short)
        for name in args.models.split(","):
            spec = MODELS[name] or random_vit_b(folder)
            (folder / name).mkdir()
            probe_dir = make_probe(folder / name, short, spec, fps=1.0)  # a folder per model: its own store
            export_onnx(probe_dir, folder / f"onnx-{name}")
            probe = load_probe(probe_dir)
            model = load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0, progression=False))
            options = ort.SessionOptions()
            options.intra_op_num_threads = args.threads
            session = ort.InferenceSession(
                str(folder / f"onnx-{name}" / RECOGNIZER), options, providers=["CPUExecutionProvider"]
            )
            height, width = model.plan.crop
            for batch in [int(b) for b in args.batches.split(",")]:
                frames = torch.randint(0, 256, (batch, 3, height, width), dtype=torch.uint8)
                result = {
                    "model": name,
                    "batch": batch,
                    **measure(model, probe, session, frames, args.repeats),
                }
                result.update(threads=args.threads, onnxruntime=ort.__version__, torch=torch.__version__)
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
