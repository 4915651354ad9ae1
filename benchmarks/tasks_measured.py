"""Measure the shipped tiny model against its random init and raw pixels on the triplet and CVS tasks.

Not a speed target: the science behind README's "Triplets and the critical view of safety, measured". For
each model it runs what a user runs - `plstitch extract` of `synthetic-triplets` and `synthetic-cvs` on the
CPU, then `plstitch linear --task triplets|cvs` for several seeds - and prints, per task, each model's
headline (mean ± sample std over the seeds) and the paired per-video difference of the shipped model against
each other model (each video's figure averaged over the seeds first; 95 % t interval over the test videos).

    python benchmarks/tasks_measured.py --out /tmp/tasks-measured --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from plstitch_eval.utils.stats import mean_std, paired_difference

MODELS = ("plstitch-tiny-synthetic", "random-init:plstitch-tiny-synthetic", "raw-pixels")
TASKS = {"triplets": ("synthetic-triplets", "mAP_IVT"), "cvs": ("synthetic-cvs", "mAP")}


def plstitch(*args: str) -> None:
    """Run the CLI as a user would; stop on failure."""
    subprocess.run([sys.executable, "-m", "plstitch_eval", "--quiet", *args], check=True)


def measure(out: Path, seeds: list[int], device: str) -> dict[str, dict[str, dict[int, dict]]]:
    """results[task][model][seed] = the results JSON of `linear --task` on the model's store."""
    results: dict[str, dict[str, dict[int, dict]]] = {}
    for task, (dataset, _) in TASKS.items():
        for model in MODELS:
            store = out / dataset / model.replace(":", "_")
            if not (store / "manifest.json").is_file():
                plstitch("extract", "--dataset", dataset, "--model", model, "--out", str(store),
                         "--device", device)  # fmt: skip
            for seed in seeds:
                path = store.parent / f"{store.name}-{task}-seed{seed}.json"
                if not path.is_file():
                    plstitch("linear", "--features", str(store), "--task", task, "--seed", str(seed),
                             "--device", device, "--json", str(path))  # fmt: skip
                results.setdefault(task, {}).setdefault(model, {})[seed] = json.loads(path.read_text())
    return results


def video_means(runs: dict[int, dict], metric: str) -> dict[str, float]:
    """Each test video's `metric`, averaged over the seeds where it is defined."""
    values: dict[str, list[float]] = {}
    for run in runs.values():
        for video, record in run["per_video"].items():
            value = record.get(metric)
            if value is not None and np.isfinite(value):
                values.setdefault(video, []).append(float(value))
    return {video: float(np.mean(v)) for video, v in values.items()}


def report(results: dict[str, dict[str, dict[int, dict]]]) -> str:
    """Markdown: per task, each model's headline and the shipped model's paired differences."""
    lines = []
    for task, (dataset, metric) in TASKS.items():
        lines += [f"### {task} on {dataset} ({metric}, linear probe)", "",
                  f"| model | {metric} (mean ± std over seeds) | tiny − this: mean [95 % interval], videos |",
                  "| --- | ---: | ---: |"]  # fmt: skip
        tiny = video_means(results[task][MODELS[0]], metric)
        for model in MODELS:
            runs = results[task][model]
            mean, std = mean_std([run["metrics"][metric] for run in runs.values()])
            cell = f"{mean:.1f} ± {std:.1f}" if std is not None else f"{mean:.1f}"
            diff = ""
            if model != MODELS[0]:
                other = video_means(runs, metric)
                videos = sorted(set(tiny) & set(other))
                d = paired_difference([tiny[v] for v in videos], [other[v] for v in videos])
                diff = f"{d['mean']:+.1f} [{d['ci_low']:+.1f}, {d['ci_high']:+.1f}], {d['n']}"
            lines.append(f"| {model} | {cell} | {diff} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    results = measure(args.out, [int(s) for s in args.seeds.split(",")], args.device)
    print(report(results))


if __name__ == "__main__":
    main()
