"""Feature-extraction throughput: end-to-end `extract_features` frames/s vs model-forward-only frames/s.

Both are measured in one run, interleaved (forward, end-to-end, forward, ...), with the same model and batch
size; the ratio end-to-end / forward-only says how much of the model's speed the pipeline keeps. Two inputs:
an AutoLaparo-layout frame-folder dataset (JPEG frames at 1 fps) and a Cholec80-layout MP4 dataset (25 fps
source, sampled at 1 fps). The model is timm's ViT-S/16 at 224 px with random weights (no download).

    python benchmarks/extract.py            # 3 videos x 32 sampled frames per input, 3 interleaved rounds
    python benchmarks/extract.py --quick    # 2 videos x 16 sampled frames, one round (smoke run)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import av
import numpy as np
import timm
import torch
from PIL import Image

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.datasets.autolaparo import AUTOLAPARO_PHASES
from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.hub import DataConfig, Encoder
from plstitch_eval.preprocess import frame_plan, normalize_crops

SOURCE_FPS = 25
SAMPLE_FPS = 1.0


@dataclass
class Row:
    """One input kind: end-to-end and forward-only throughput and their ratio."""

    input: str
    frames: int
    end_to_end_fps: float
    forward_only_fps: float
    ratio: float
    target: float
    all_ratios: list[float]


class FrameSource:
    """Smooth drifting frames with a moving disc and mild noise (compress like footage, unlike pure noise)."""

    def __init__(self, seed: int, height: int, width: int) -> None:
        rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0 : 2 * height, 0 : 2 * width].astype(np.float32)
        tint = rng.uniform(0.5, 1.0, size=3).astype(np.float32)
        phase = np.sin(xx / 37 + yy / 53)[..., None]
        self.base = (60 + 120 * tint * (0.5 + 0.5 * phase)).astype(np.uint8)  # [2H, 2W, 3]
        self.noise = rng.integers(-6, 7, size=(8, height, width, 3)).astype(np.int16)
        self.height, self.width = height, width
        self.yy, self.xx = yy[:height, :width], xx[:height, :width]

    def frame(self, t: float) -> np.ndarray:
        """The frame at time `t` seconds."""
        h, w = self.height, self.width
        dy, dx = int(h / 2 * (1 + np.sin(t * 0.3))), int(w / 2 * (1 + np.cos(t * 0.2)))
        image = self.base[dy : dy + h, dx : dx + w].astype(np.int16) + self.noise[int(t * 25) % 8]
        cx, cy = w * (0.5 + 0.3 * np.sin(t * 0.7)), h * (0.5 + 0.3 * np.cos(t * 0.5))
        image[(self.xx - cx) ** 2 + (self.yy - cy) ** 2 < (h / 6) ** 2] = (230, 200, 190)
        return image.clip(0, 255).astype(np.uint8)


def make_frame_folders(root: Path, n_videos: int, n_frames: int, height: int, width: int) -> Path:
    """AutoLaparo layout: frames/NN/XXXX.jpg (1 fps, 1-indexed) + labels/label_NN.txt (1-based ids)."""
    for v in range(1, n_videos + 1):
        folder = root / "frames" / f"{v:02d}"
        folder.mkdir(parents=True)
        source = FrameSource(v, height, width)
        for i in range(n_frames):
            Image.fromarray(source.frame(float(i))).save(folder / f"{i + 1:04d}.jpg", quality=90)
        rows = [f"{i + 1}\t{1 + i * len(AUTOLAPARO_PHASES) // n_frames}" for i in range(n_frames)]
        (root / "labels").mkdir(exist_ok=True)
        (root / "labels" / f"label_{v:02d}.txt").write_text("Frame\tPhase\n" + "\n".join(rows) + "\n")
    return root


def make_mp4s(root: Path, n_videos: int, seconds: int, height: int, width: int) -> Path:
    """Cholec80 layout: videos/videoNN.mp4 (H.264, 25 fps) + phase_annotations/videoNN-phase.txt."""
    (root / "videos").mkdir(parents=True)
    (root / "phase_annotations").mkdir()
    n_frames = seconds * SOURCE_FPS
    for v in range(1, n_videos + 1):
        source = FrameSource(100 + v, height, width)
        with av.open(str(root / "videos" / f"video{v:02d}.mp4"), "w") as container:
            stream = container.add_stream("libx264", rate=SOURCE_FPS)
            stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
            stream.options = {"preset": "veryfast", "crf": "23"}
            for i in range(n_frames):
                image = source.frame(i / SOURCE_FPS)
                for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                    container.mux(packet)
            for packet in stream.encode():
                container.mux(packet)
        rows = [f"{i}\t{CHOLEC80_PHASES[i * len(CHOLEC80_PHASES) // n_frames]}" for i in range(n_frames)]
        (root / "phase_annotations" / f"video{v:02d}-phase.txt").write_text(
            "Frame\tPhase\n" + "\n".join(rows)
        )
    return root


def forward_only_fps(encoder: Encoder, batch_size: int, n_frames: int) -> float:
    """Frames/s of normalise + forward on ready uint8 batches (what the pipeline does minus all data work)."""
    plan = frame_plan(encoder.data_config, SAMPLE_FPS)
    images = torch.randint(0, 256, (batch_size, 3, *plan.crop), dtype=torch.uint8)
    n_batches = max(1, round(n_frames / batch_size))
    with torch.inference_mode():
        encoder(normalize_crops(images, plan))  # warm-up
        start = time.perf_counter()
        for _ in range(n_batches):
            encoder(normalize_crops(images, plan)).float().cpu()
        elapsed = time.perf_counter() - start
    return n_batches * batch_size / elapsed


def end_to_end_fps(
    dataset: str, root: Path, encoder: Encoder, out: Path, args: argparse.Namespace
) -> tuple[float, int]:
    """Frames/s of a full `extract_features` run (decode workers, forward, labelling, atomic writes)."""
    adapter = get_dataset(dataset, root=root)
    start = time.perf_counter()
    options = ExtractOptions(
        fps=SAMPLE_FPS,
        batch_size=args.batch_size,
        num_workers=args.num_workers,
        device="cpu",
        precision="fp32",
        resize_on_decode=args.resize_on_decode,
        progress=False,
    )
    summary = extract_features(adapter, encoder, out, options)
    elapsed = time.perf_counter() - start
    if not summary.ok:
        raise SystemExit(f"extraction failed: {[r.error for r in summary.failed]}")
    return summary.frames / elapsed, summary.frames


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 videos x 16 sampled frames, one round.")
    parser.add_argument("--videos", type=int, default=3, help="Videos per input kind.")
    parser.add_argument("--seconds", type=int, default=32, help="Sampled frames per video (1 fps).")
    parser.add_argument("--repeats", type=int, default=3, help="Interleaved rounds; the median is shown.")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=1, help="Decoding workers.")
    parser.add_argument("--height", type=int, default=270, help="Source frame height.")
    parser.add_argument("--width", type=int, default=480, help="Source frame width.")
    parser.add_argument("--model", default="vit_small_patch16_224", help="timm architecture (random init).")
    parser.add_argument("--resize-on-decode", action="store_true", help="Let FFmpeg/PIL resize on decode.")
    parser.add_argument("--json", action="store_true", help="Print the rows as JSON.")
    args = parser.parse_args(argv)
    if args.quick:
        args.videos, args.seconds, args.repeats = 2, 16, 1
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.manual_seed(0)
    model = timm.create_model(args.model, pretrained=False, num_classes=0).eval()
    encoder = Encoder(model, DataConfig(), {"spec": f"timm:{args.model} (random init)", "sha256": None})
    with tempfile.TemporaryDirectory(prefix="plstitch-bench-") as tmp:
        tmp_path = Path(tmp)
        t0 = time.perf_counter()
        folders = make_frame_folders(
            tmp_path / "autolaparo", args.videos, args.seconds, args.height, args.width
        )
        videos = make_mp4s(tmp_path / "cholec80", args.videos, args.seconds, args.height, args.width)
        print(f"data generated in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        n_frames = args.videos * args.seconds
        forward_only_fps(encoder, args.batch_size, args.batch_size)  # warm-up of threads and allocator
        inputs = [("frame folders (jpg, 1 fps)", "autolaparo", folders, 0.9),
                  ("mp4 (25 fps source, 1 fps)", "cholec80", videos, 0.8)]  # fmt: skip
        # Interleave forward-only and end-to-end runs; each ratio uses the forward-only runs just before
        # and after it, so that load from other processes hits both sides alike. Report the median.
        fwd = [forward_only_fps(encoder, args.batch_size, n_frames)]
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name, *_ in inputs}
        for repeat in range(args.repeats):
            for name, dataset, root, _ in inputs:
                out = tmp_path / f"store-{dataset}-{repeat}"
                e2e, frames = end_to_end_fps(dataset, root, encoder, out, args)
                fwd.append(forward_only_fps(encoder, args.batch_size, n_frames))
                measured[name].append((e2e, (fwd[-2] + fwd[-1]) / 2))
    rows = []
    for name, _, _, target in inputs:
        pairs = measured[name]
        ratios = [e2e / ref for e2e, ref in pairs]
        best = sorted(range(len(pairs)), key=lambda i: ratios[i])[len(pairs) // 2]  # the median run
        rows.append(Row(name, frames, pairs[best][0], pairs[best][1], ratios[best], target, ratios))
    if args.json:
        print(json.dumps({"settings": vars(args), "rows": [asdict(r) for r in rows]}, indent=2))
        return
    print(
        f"model {args.model} (random init), batch {args.batch_size}, {args.num_workers} decoding worker(s), "
        f"{torch.get_num_threads()} torch threads, source {args.width}x{args.height}, "
        f"resize_on_decode={args.resize_on_decode}"
    )
    print(f"{'input':<30} {'frames':>6} {'end-to-end f/s':>15} {'forward-only f/s':>17} {'ratio':>6} target")
    for r in rows:
        verdict = "ok" if r.ratio >= r.target else "BELOW"
        print(
            f"{r.input:<30} {r.frames:>6} {r.end_to_end_fps:>15.2f} {r.forward_only_fps:>17.2f} "
            f"{r.ratio:>6.2f} >={r.target} {verdict}  (runs: {', '.join(f'{x:.2f}' for x in r.all_ratios)})"
        )


if __name__ == "__main__":
    main()
