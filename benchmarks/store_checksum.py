"""What the feature store's checksums cost, side by side in one run: reading every video of a store with its
files' sha256 verified (what every reader does) against the same read with the checksums left out of the
manifest (a store made before them), best of ``--repeats`` interleaved rounds (wall and process CPU seconds).

Prints verified/unverified. The files are in the page cache after the first round, so this is the worst case
for the checksum: from a disk the read itself dominates.

    python benchmarks/store_checksum.py                       # 20 videos x 3000 frames x 768 (9 MB each)
    python benchmarks/store_checksum.py --videos 5 --frames 600 --repeats 2
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np

from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.store.repair import CHECKSUMS


def build_store(root: Path, videos: int, frames: int, dim: int) -> list[str]:
    """A store of seeded random features; returns its video names."""
    names = [f"video{i:02d}" for i in range(videos)]
    store = FeatureStore.create(
        root, {"dataset": "bench", "model_spec": "random", "splits": {"train": names}}
    )
    rng = np.random.default_rng(0)
    for name in names:
        features = rng.standard_normal((frames, dim), dtype=np.float32)
        labels = rng.integers(0, 7, frames)
        store.write(VideoFeatures(name, features, labels, np.arange(frames, dtype=np.float64)))
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=20)
    parser.add_argument("--frames", type=int, default=3000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the one-line note about an unverified store
    with tempfile.TemporaryDirectory(prefix="plstitch-bench-") as tmp:
        store = FeatureStore(Path(tmp) / "store")
        names = build_store(store.root, args.videos, args.frames, args.dim)
        verified = store.manifest
        assert set(verified[CHECKSUMS]) == set(names)
        unverified = {k: v for k, v in verified.items() if k != CHECKSUMS}
        best = {"verified": (float("inf"), float("inf")), "unverified": (float("inf"), float("inf"))}
        for _ in range(args.repeats):
            for label, manifest in (("verified", verified), ("unverified", unverified)):
                start, cpu = time.perf_counter(), time.process_time()
                for name in names:
                    store.read(name, manifest)
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu
                best[label] = (min(best[label][0], wall), min(best[label][1], cpu))
        size = sum(store.path(n).stat().st_size for n in names) / 1e6
        print(f"store: {args.videos} videos, {size:.0f} MB; best of {args.repeats} interleaved rounds")
        for label, (wall, cpu) in best.items():
            print(
                f"  {label:10s} read: {wall * 1e3:8.1f} ms wall ({wall * 1e3 / args.videos:.1f} ms/video), "
                f"{cpu * 1e3:8.1f} ms CPU"
            )
        ratio = best["verified"][0] / best["unverified"][0]
        cpu_ratio = best["verified"][1] / best["unverified"][1]
        print(
            f"verified / unverified: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU "
            f"(sha256 {size / max(best['verified'][0] - best['unverified'][0], 1e-9):.0f} MB/s on top)"
        )


if __name__ == "__main__":
    main()
