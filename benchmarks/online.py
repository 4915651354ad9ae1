"""Live prediction latency: a sender streams a synthetic procedural video (H.264 in MPEG-TS, a keyframe per
second) at real-time pace over loopback UDP or TCP while `plstitch predict --online URL --jsonl` runs.

For each model, transport and probe rate it reports, from the JSON lines and the summary:
- capture-to-prediction latency p50/p95/p99 (frame decoded -> its probabilities written; `latency_s`);
- end-to-end p50/p99 (the frame's due send time -> prediction; the send clock is taken as the earliest
  arrival, so it is a lower bound by the loopback delay);
- keep-up (samples predicted / samples due), dropped samples, and lag growth (the end-to-end delay's least
  squares slope, ms per minute; the first and last minute's mean).

    python benchmarks/online.py --seconds 300                      # tiny model, UDP+TCP, 1 fps, 5 min
    python benchmarks/online.py --model vit-b16 --seconds 60 --fps 1  # pl-stitch-lemon's ViT-B/16, random
    python benchmarks/online.py --fps 1,5,10,25 --seconds 30         # the highest rate that keeps up
    python benchmarks/online.py --probes 1,3 --rounds 3 --seconds 60  # three probes on one backbone vs one
    python benchmarks/online.py --other-model raw-pixels --rounds 3   # two backbones vs each alone

Probes are random linear heads on the model's features (timing only: the classes do not matter). With
`--probes 1,3` the runs of one probe and of three (one backbone: one decode and one encoder pass per frame)
alternate `--rounds` times per transport, and a last line gives the three-probe run's latency p50, mean and
p99 over the one-probe run's, and the same ratio for the in-process cost of predicting the clip as a file
(best of `--rounds`; no sender, no network: decoding, the model's and the heads' own time).

With `--other-model SPEC`, one probe on `--model` and one on SPEC run side by side in one run (one decode,
one encoder pass per backbone per frame); a line gives the clip's in-process time of the two together
against each alone and their sum (best of `--rounds`).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np
import torch

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.probes import LinearProbeHead, save_probe
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.utils.sender import free_port, wait_udp_listener

HOST = "127.0.0.1"
VIT_B = "vit-b16"  # --model: a random ViT-B/16 (the pl-stitch-lemon architecture) saved as a timm folder


def random_vit_b(folder: Path) -> str:
    """A timm-format folder holding a ViT-B/16 with random weights (timing needs no weights, nor network)."""
    import timm

    from plstitch_eval.hub.timm_format import save_timm_dir
    from plstitch_eval.preprocess import DataConfig

    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0)
    return str(save_timm_dir(model, folder / "vit-b16", DataConfig()))


def stream_video(folder: Path, seconds: float, size: int) -> tuple[Path, Path]:
    """One synthetic procedural video re-encoded with a keyframe per second (the sender loops it), and the
    synthetic dataset root (for a probe's manifest)."""
    root = generate_synthetic(
        folder / "synthetic",
        n_videos=1,
        size=size,
        seed=0,
        min_seconds=seconds,
        max_seconds=seconds,
        workers=1,
    )
    source = root / "videos" / "video01.mp4"
    target = folder / "stream.mp4"
    with av.open(str(source)) as src, av.open(str(target), "w") as dst:
        stream = dst.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = size, size, "yuv420p"
        stream.options = {
            "preset": "ultrafast",
            "crf": "18",
            "g": "25",
            "keyint_min": "25",
            "tune": "zerolatency",
        }
        for frame in src.decode(video=0):
            dst.mux(stream.encode(frame.reformat(format="yuv420p")))
        dst.mux(stream.encode(None))
    return target, root


def make_probe(folder: Path, synthetic: dict, model: str, fps: float, seed: int = 0) -> Path:
    """A random linear probe on `model`'s features at `fps` (its manifest from extracting a 2 s video)."""
    adapter = get_dataset("synthetic", **synthetic)
    store = folder / f"store-{fps:g}"
    options = ExtractOptions(fps=fps, num_workers=0, device="cpu", progress=False)
    if not (store / "manifest.json").exists():
        assert extract_features(adapter, model, store, options).ok
    features = FeatureStore(store)
    dim = int(features.manifest["feature_dim"])
    torch.manual_seed(seed)
    head = LinearProbeHead(
        torch.zeros(dim),
        torch.ones(dim),
        torch.randn(dim, len(features.class_names)),
        torch.zeros(len(features.class_names)),
    )
    return save_probe(
        folder / f"probe-{fps:g}" if not seed else folder / f"probe-{fps:g}-{seed}",
        "linear",
        head,
        features.manifest,
        features.class_names,
        {},
        {},
    )


def run_one(
    probes: list[Path], video: Path, transport: str, seconds: float, loops: int, folder: Path
) -> dict:
    """Stream `video` (`loops` times) over `transport` while predict runs `probes`; the measured figures."""
    kind = socket.SOCK_DGRAM if transport == "udp" else socket.SOCK_STREAM
    port = free_port(kind)
    address = f"{transport}://{HOST}:{port}"
    lines, summary = folder / f"{transport}.jsonl", folder / f"{transport}.json"
    for path in (lines, summary):
        path.unlink(missing_ok=True)
    predict = [
        "plstitch", "--quiet", "predict", *(a for p in probes for a in ("--probe", str(p))),
        "--online", address, "--jsonl", str(lines),
        "--json", str(summary), "--connect-timeout", "60" if transport == "tcp" else "3", "--device", "cpu",
    ]  # fmt: skip
    send_to = f"{address}?listen=1" if transport == "tcp" else address
    send = [sys.executable, "-m", "plstitch_eval.utils.sender", str(video), send_to, "--loops", str(loops)]
    if transport == "tcp":
        sender = subprocess.Popen(send, stdout=subprocess.DEVNULL)
        receiver = subprocess.Popen(predict, stdout=subprocess.DEVNULL)
    else:
        receiver = subprocess.Popen(predict, stdout=subprocess.DEVNULL)
        wait_udp_listener(port, timeout=300)  # predict starts (loads its model) first
        sender = subprocess.Popen(send, stdout=subprocess.DEVNULL)
    sender.wait()
    receiver.wait()
    rows = [json.loads(line) for line in lines.read_text().splitlines()]
    live = json.loads(summary.read_text())["videos"][0]["live"]
    latency = np.array([r["latency_s"] for r in rows]) * 1000
    done = np.array([r["captured_at"] + r["latency_s"] for r in rows])
    times = np.array([r["time_s"] for r in rows])
    send_clock = np.min(np.array([r["captured_at"] for r in rows]) - times)
    e2e = (done - send_clock - times) * 1000
    minutes = times / 60
    slope = float(np.polyfit(minutes, e2e, 1)[0]) if len(rows) > 2 else float("nan")
    first, last = e2e[times < times[0] + 60], e2e[times > times[-1] - 60]
    return {
        "transport": transport,
        "probes": len(probes),
        "samples": len(rows),
        "due": live["due"],
        "dropped": live["dropped"],
        "kept_up": live["kept_up"],
        "latency_ms": {q: round(float(np.percentile(latency, int(q[1:]))), 1) for q in ("p50", "p95", "p99")},
        "latency_mean_ms": round(float(latency.mean()), 2),
        "e2e_ms": {q: round(float(np.percentile(e2e, int(q[1:]))), 1) for q in ("p50", "p99")},
        "lag_growth_ms_per_min": round(slope, 2),
        "e2e_first_last_min_ms": [round(float(first.mean()), 1), round(float(last.mean()), 1)],
        "seconds": round(float(times[-1] - times[0]), 1),
    }


def file_seconds(probes: list[Path], video: Path) -> float:
    """Wall seconds of predicting `video` as a file with `probes` in this process (model loaded first)."""
    from plstitch_eval.predict import PredictOptions, ProbeSet, VideoSource, predict_online
    from plstitch_eval.predict.backbones import load_backbones
    from plstitch_eval.probes import load_probe

    loaded = ProbeSet.of([load_probe(p) for p in probes])
    models = load_backbones(loaded, PredictOptions(device="cpu", num_workers=0, progression=False))
    return predict_online(loaded, models, VideoSource("clip", video), lambda _: None).wall_seconds


def two_backbones(first: Path, other: Path, video: Path, rounds: int) -> dict:
    """The clip predicted as a file with a probe on each of two backbones together, and with each alone (best
    of `rounds` interleaved runs after one unmeasured, seconds): together should cost about the sum, less the
    one decode they share."""
    runs = {"first": [first], "other": [other], "both": [first, other]}
    file_seconds(runs["both"], video)  # warm up (first forwards, allocator)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, probes in runs.items():
            times[name].append(file_seconds(probes, video))
    best = {name: min(values) for name, values in times.items()}
    return {
        "compare": "two backbones in one run / each alone",
        "file_seconds": {name: round(value, 3) for name, value in best.items()},
        "ratio_to_sum": round(best["both"] / (best["first"] + best["other"]), 3),
    }


def per_frame_ms(probes: list[Path], repeats: int = 200) -> dict[str, float]:
    """The per-frame cost of the encoder pass and of the heads of 1 and of all `probes` (best of `repeats`
    interleaved calls, ms): what several probes add to a frame, free of the stream's and other jobs' noise."""
    from plstitch_eval.predict import FRAMEWISE_KINDS, PredictOptions, ProbeSet, load_probe_encoder
    from plstitch_eval.predict.case import online_heads
    from plstitch_eval.preprocess import prepare_frame
    from plstitch_eval.probes import load_probe

    loaded = [load_probe(p) for p in probes]
    model = load_probe_encoder(loaded[0], PredictOptions(device="cpu", num_workers=0, progression=False))
    image = np.random.default_rng(0).integers(0, 256, (224, 224, 3), dtype=np.uint8)
    crop = prepare_frame(image, model.plan)[None]  # as `online._follow` hands a frame to the encoder
    feature = model.encode(crop)[0].cpu().numpy()
    heads = {n: online_heads(ProbeSet.of(loaded[:n]), FRAMEWISE_KINDS) for n in (1, len(loaded))}
    best = {"encoder": float("inf"), **{f"heads_{n}": float("inf") for n in heads}}
    for i in range(repeats):
        started = time.perf_counter()
        model.encode(crop)
        best["encoder"] = min(best["encoder"], time.perf_counter() - started)
        for n, head in heads.items():
            started = time.perf_counter()
            head.push(feature, float(i))
            best[f"heads_{n}"] = min(best[f"heads_{n}"], time.perf_counter() - started)
    return {key: round(value * 1000, 4) for key, value in best.items()}


def compare(results: list[dict], file_times: dict[int, list[float]]) -> dict:
    """Three probes over one: the live runs' latency p50, mean, p99 (medians over rounds), and the file's
    best in-process time."""
    few, many = min(file_times), max(file_times)

    def median(n: int, key) -> float:
        return float(np.median([key(r) for r in results if r["probes"] == n]))

    ratio = {
        name: round(median(many, key) / median(few, key), 3)
        for name, key in (
            ("latency_p50", lambda r: r["latency_ms"]["p50"]),
            ("latency_mean", lambda r: r["latency_mean_ms"]),
            ("latency_p99", lambda r: r["latency_ms"]["p99"]),
        )
    }
    ratio["file"] = round(min(file_times[many]) / min(file_times[few]), 3)
    return {
        "compare": f"{many} probes / {few} probe (one backbone)",
        "ratio": ratio,
        f"p99_ms_{many}_probes": median(many, lambda r: r["latency_ms"]["p99"]),
        "file_seconds": {str(n): round(min(t), 3) for n, t in file_times.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="plstitch-tiny-synthetic")
    parser.add_argument("--fps", default="1", help="probe rates, comma-separated")
    parser.add_argument("--transports", default="udp,tcp")
    parser.add_argument("--seconds", type=float, default=300.0, help="stream length")
    parser.add_argument("--size", type=int, default=224, help="frame side of the synthetic stream")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--probes", default="1", help="probe counts on one backbone, comma-separated (1,3)")
    parser.add_argument("--rounds", type=int, default=1, help="with several --probes: alternations")
    parser.add_argument("--other-model", default=None, help="a second backbone: two backbones vs each alone")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
    clip_s = 30.0
    loops = max(1, int(np.ceil(args.seconds / clip_s)))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        video, _ = stream_video(folder, clip_s, args.size)
        short = {"n_videos": 1, "size": args.size, "seed": 1, "min_seconds": 2.0, "max_seconds": 2.0}
        short["root"] = generate_synthetic(folder / "short", workers=1, **short)
        model = random_vit_b(folder) if args.model == VIT_B else args.model
        counts = [int(n) for n in args.probes.split(",")]
        for fps in [float(f) for f in args.fps.split(",")]:
            probes = [make_probe(folder, short, model, fps, seed) for seed in range(max(counts))]
            if args.other_model:
                (folder / "other").mkdir(exist_ok=True)
                other = make_probe(folder / "other", short, args.other_model, fps)
                line = two_backbones(probes[0], other, video, args.rounds)
                print(json.dumps({**line, "other_model": args.other_model, "fps": fps}), flush=True)
            results: list[dict] = []
            file_times: dict[int, list[float]] = {n: [] for n in counts}
            for _ in range(args.rounds if len(counts) > 1 else 1):
                for transport in args.transports.split(","):
                    for n in counts:
                        result = run_one(probes[:n], video, transport, args.seconds, loops, folder)
                        result.update(
                            model=args.model, fps=fps, cpu_threads=torch.get_num_threads(), frame=args.size
                        )
                        results.append(result)
                        print(json.dumps(result), flush=True)
                if len(counts) > 1:
                    for n in counts:
                        file_times[n].append(file_seconds(probes[:n], video))
            if len(counts) > 1:
                costs = per_frame_ms(probes[: max(counts)])
                n = max(counts)
                frame_ratio = (costs["encoder"] + costs[f"heads_{n}"]) / (costs["encoder"] + costs["heads_1"])
                costs["frame_ratio"] = round(frame_ratio, 4)
                print(
                    json.dumps({**compare(results, file_times), "per_frame_ms": costs, "fps": fps}),
                    flush=True,
                )


if __name__ == "__main__":
    main()
