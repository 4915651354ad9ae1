"""How far a frame cache moves the quickstart's numbers: k-NN and linear probe from video against from caches.

The quickstart's dataset (synthetic, 24 videos, 64 px, 1 fps) and the shipped `plstitch-tiny-synthetic`, on
the CPU. For each row - video, and a `write-lmdb --eval-frames` cache as JPEG at each `--qualities` and as
lossless PNG - it runs the CLI commands a user would (printed as it goes), then reports test accuracy and
macro F1 per video of k-NN (k = 20) and the linear probe, the difference from video, the mean and lowest
per-frame cosine of the features against video's and whether they are equal byte for byte; for caches also
the bytes on disk, the write time and the read time (ms per frame: LMDB lookup and decoding, `FrameCache`
on the CPU). Then, as frames of real footage are larger than the quickstart's 64 px, what each format costs
on 854 x 480 frames (`extract.py`'s drifting textured source, 1 fps of an H.264 video): KB per frame and
milliseconds to encode and decode one (Pillow). Writes the rows as JSON (`--json`) and markdown tables on
stdout (docs/frame-cache.md).

    python benchmarks/frame_cache_accuracy.py --out /tmp/fc [--qualities 90 95 100] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from extract import make_mp4s

import plstitch_eval.data.frames_lmdb as frames_lmdb
from plstitch_eval.data.decoders import read_frames
from plstitch_eval.data.frames_lmdb import FrameCache, decode_frame, encode_frame
from plstitch_eval.store.features import FeatureStore

MODEL = "plstitch-tiny-synthetic"
METRICS = ("accuracy", "macro_f1_video")


def run(command: list[str]) -> float:
    """Run a `plstitch` command (printed first); its wall time in seconds."""
    print("$ " + " ".join(command), flush=True)
    tick = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - tick


def evaluate(store: Path, results: Path) -> dict[str, dict[str, float]]:
    """`plstitch knn` and `plstitch linear` on `store`: {protocol: {metric: value}} from their results."""
    metrics = {}
    for protocol in ("knn", "linear"):
        out = results / f"{protocol}.json"
        if not out.exists():
            run(["plstitch", "-q", protocol, "--features", str(store), "--device", "cpu", "--json", str(out)])
        found = json.loads(out.read_text())["metrics"]
        metrics[protocol] = {name: float(found[name]) for name in METRICS}
    return metrics


def compare(video: FeatureStore, other: FeatureStore) -> dict[str, Any]:
    """Per-frame cosine of `other`'s features against video's (mean, lowest) and byte equality."""
    cosines, equal = [], True
    for name in video.videos():
        a, b = video.read(name), other.read(name)
        assert np.array_equal(a.frame_times, b.frame_times) and np.array_equal(a.labels, b.labels)
        same = a.features.dtype == b.features.dtype and a.features.tobytes() == b.features.tobytes()
        equal = equal and same
        a64, b64 = a.features.astype(np.float64), b.features.astype(np.float64)
        cos = (a64 * b64).sum(1) / (np.linalg.norm(a64, axis=1) * np.linalg.norm(b64, axis=1))
        cosines.append(cos)
    every = np.concatenate(cosines)
    return {"cosine_mean": float(every.mean()), "cosine_min": float(every.min()), "bytes_equal": equal}


def read_ms_per_frame(path: Path) -> float:
    """Milliseconds per frame to read every frame of the cache on the CPU (`FrameCache.frames`)."""
    cache = FrameCache.open(path)
    tick, frames = time.perf_counter(), 0
    for name in cache.names:
        frames += sum(1 for _ in cache.frames(name))
    return 1000 * (time.perf_counter() - tick) / frames


def codec_costs(folder: Path, qualities: list[int], seconds: int = 20) -> dict[str, dict[str, float]]:
    """KB per frame and ms to encode / decode one, per format, on 854 x 480 frames sampled at 1 fps."""
    videos = folder / "codec-videos"
    if not videos.exists():
        make_mp4s(videos, 1, seconds, 480, 854)
    images = [frame.image for frame in read_frames(videos / "videos" / "video01.mp4", 1.0)]
    formats = [(f"jpeg-q{q}", q, "jpeg", None) for q in qualities]
    formats += [(f"png (zlib level {level})", None, "png", level) for level in (1, 6)]
    costs = {}
    for name, quality, image_format, level in formats:
        if level is not None:
            frames_lmdb.PNG_COMPRESS_LEVEL = level
        tick = time.perf_counter()
        encoded = [encode_frame(image, quality, True, image_format) for image in images]
        encode_s = time.perf_counter() - tick
        tick = time.perf_counter()
        decoded = [decode_frame(value, True) for value in encoded]
        decode_s = time.perf_counter() - tick
        pairs = zip(images, decoded, strict=True)
        error = np.mean([np.abs(a.astype(int) - b.astype(int)).mean() for a, b in pairs])
        costs[name] = {
            "kb_per_frame": sum(map(len, encoded)) / len(encoded) / 1e3,
            "encode_ms": 1000 * encode_s / len(images),
            "decode_ms": 1000 * decode_s / len(images),
            "mean_abs_error": float(error),
        }
    frames_lmdb.PNG_COMPRESS_LEVEL = 1
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="Work folder (reused: finished steps skip).")
    parser.add_argument("--qualities", type=int, nargs="*", default=[90, 95, 100])
    parser.add_argument("--workers", type=int, default=2, help="Decoding workers of `plstitch extract`.")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    out = args.out
    extract = ["plstitch", "-q", "extract", "--dataset", "synthetic", "--model", MODEL, "--device", "cpu",
               "--num-workers", str(args.workers)]  # fmt: skip
    rows: dict[str, dict[str, Any]] = {}
    video_store = out / "features" / "video"
    seconds = 0.0 if (video_store / "manifest.json").exists() else run([*extract, "--out", str(video_store)])
    rows["video"] = {"extract_s": seconds, **evaluate(video_store, out / "results" / "video")}
    caches = [(f"jpeg-q{q}", ["--image-format", "jpeg", "--quality", str(q)]) for q in args.qualities]
    caches.append(("png", ["--image-format", "png"]))
    for name, flags in caches:
        lmdb = out / f"{name}.lmdb"
        write_s = 0.0
        if not lmdb.exists():
            write_s = run(["plstitch", "-q", "write-lmdb", "--dataset", "synthetic", "--eval-frames", *flags,
                           "--out", str(lmdb)])  # fmt: skip
        store = out / "features" / name
        extract_s = 0.0
        if not (store / "manifest.json").exists():
            extract_s = run([*extract, "--frames", str(lmdb), "--out", str(store)])
        rows[name] = {
            "write_s": write_s,
            "extract_s": extract_s,
            "bytes": (lmdb / "data.mdb").stat().st_size,
            "read_ms_per_frame": read_ms_per_frame(lmdb),
            **compare(FeatureStore(video_store), FeatureStore(store)),
            **evaluate(store, out / "results" / name),
        }
    base = rows["video"]
    print("\n| frames | k-NN acc | k-NN macro F1 | linear acc | linear macro F1 | cosine mean / min | "
          "bytes equal | cache MB | read ms/frame |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, row in rows.items():
        cells = []
        for protocol in ("knn", "linear"):
            for metric in METRICS:
                value = row[protocol][metric]  # percent, as the results JSON holds it
                delta = value - base[protocol][metric]
                cells.append(f"{value:.1f}" + ("" if name == "video" else f" ({delta:+.1f})"))
        if name == "video":
            cells += ["-", "-", "-", "-"]
        else:
            cells += [
                f"{row['cosine_mean']:.6f} / {row['cosine_min']:.5f}",
                "yes" if row["bytes_equal"] else "no",
                f"{row['bytes'] / 1e6:.1f}",
                f"{row['read_ms_per_frame']:.2f}",
            ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    costs = codec_costs(out, args.qualities)
    print("\n| 854 x 480 frame | KB per frame | encode ms | decode ms | mean abs error (grey levels) |")
    print("| --- | --- | --- | --- | --- |")
    for name, cost in costs.items():
        print(
            f"| {name} | {cost['kb_per_frame']:.0f} | {cost['encode_ms']:.1f} | {cost['decode_ms']:.1f} | "
            f"{cost['mean_abs_error']:.2f} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "codec_costs_854x480": costs}, indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
