"""Feature-extraction throughput against two floors, each measured side by side in one run.

1. Model-bound: end-to-end `extract_features` frames/s vs model-forward-only frames/s, interleaved (forward,
   end-to-end, forward, ...), same model and batch size; the ratio says how much of the model's speed the
   pipeline keeps. Two inputs: an AutoLaparo-layout frame-folder dataset (JPEG frames at 1 fps) and a
   Cholec80-layout MP4 dataset (25 fps source, sampled at 1 fps). Model: timm's ViT-S/16 at 224 px, random
   weights (no download).
2. Decode-bound: with a cheap model (the shipped tiny PL-Stitch; raw-pixels, which does next to no model
   work, stands for a model on a GPU) the run is bound by video decoding. Four
   60 s 854x480 25 fps H.264 files (Cholec80 layout) sampled at 1 fps, for each decoder of `--decoders`
   (pyav, torchcodec on the CPU). Each decoder's floor is its own decode-only work on the same files, one
   single-threaded process per core (pool started before the clock): PyAV decoding every frame (above 1 is
   possible: extraction skips non-reference frames that are not sampled, the floor decodes them all);
   TorchCodec decoding the frames sampling takes (`get_frames_at`: it decodes every frame up to each sample,
   converts only the samples, and cannot skip less). Ratio = floor seconds / `extract_features` seconds with
   its default workers, interleaved, for smooth content and for noisy content that is harder to decode.
   Beside them, decode throughput of the two decoders on the same task (the 1 fps samples of the same files,
   RGB frames, one process per core): TorchCodec-CPU vs PyAV, side by side in one run.

    python benchmarks/extract.py                     # both parts
    python benchmarks/extract.py --part decode       # decode-bound part only (--device cuda on a GPU)
    python benchmarks/extract.py --part decode --decoders pyav   # PyAV only
    python benchmarks/extract.py --quick             # small inputs, one round (smoke run)
    python benchmarks/extract.py --part many         # N encoders in one pass (benchmarks/extract_passes.py)

TorchCodec is skipped, with a line saying why, when it is not installed or finds no FFmpeg.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType

import av
import numpy as np
import timm
import torch
from PIL import Image

from plstitch_eval.data import torchcodec_decode
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.datasets.autolaparo import AUTOLAPARO_PHASES
from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES
from plstitch_eval.data.decoders import Decoding, read_frames
from plstitch_eval.extract import ExtractOptions, available_cores, extract_features
from plstitch_eval.hub import DataConfig, Encoder, load_encoder
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


class NoisyFrameSource(FrameSource):
    """The same scenes under strong per-pixel noise: many more bits per frame, slower to decode."""

    def __init__(self, seed: int, height: int, width: int) -> None:
        super().__init__(seed, height, width)
        rng = np.random.default_rng(seed + 1)
        self.noise = rng.integers(-40, 41, size=(8, height, width, 3)).astype(np.int16)


def make_mp4s(
    root: Path, n_videos: int, seconds: int, height: int, width: int, source_kind: type = FrameSource
) -> Path:
    """Cholec80 layout: videos/videoNN.mp4 (H.264, 25 fps) + phase_annotations/videoNN-phase.txt."""
    (root / "videos").mkdir(parents=True)
    (root / "phase_annotations").mkdir()
    n_frames = seconds * SOURCE_FPS
    for v in range(1, n_videos + 1):
        source = source_kind(100 + v, height, width)
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
    images = torch.randint(0, 256, (batch_size, 3, *plan.crop), dtype=torch.uint8).to(encoder.device)
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


@dataclass
class DecodeRow:
    """One content kind, model and decoder of the decode-bound part: extraction seconds against the
    decode-only floor of the same decoder."""

    input: str
    model: str
    decoder: str
    floor: str
    frames_decoded_by_floor: int
    sampled_frames: int
    floor_seconds: float
    extract_seconds: float
    ratio: float
    target: float
    all_ratios: list[float]


def decode_every_frame(path: str) -> int:
    """The floor's unit of work: PyAV decodes every frame of one file on one thread."""
    n = 0
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_count = 1
        for _ in container.decode(stream):
            n += 1
    return n


def sample_frames(decoder: str, path: str) -> int:
    """The sampled-decoding unit of work: `decoder` gives the 1 fps RGB samples of one file on one thread."""
    return sum(1 for _ in read_frames(path, SAMPLE_FPS, threads=1, decoding=Decoding(decoder)))


def torchcodec_sampled(path: str) -> int:
    """TorchCodec's floor: `sample_frames` with TorchCodec (it decodes every frame up to each sample)."""
    return sample_frames("torchcodec", path)


def pyav_sampled(path: str) -> int:
    """PyAV's sampled decoding (the extraction path's, non-reference frames skipped), for the side by side."""
    return sample_frames("pyav", path)


def load_decoders(_: int) -> int:
    """Load TorchCodec and FFmpeg's libraries in a pool process before any clock (the import is not decoding);
    the pause spreads the calls over the processes."""
    torchcodec_decode.unavailable_reason()
    time.sleep(0.3)
    return 0


FLOORS = {  # decoder -> (floor name, its unit of work over one file)
    "pyav": ("PyAV every frame", decode_every_frame),
    "torchcodec": ("TorchCodec samples", torchcodec_sampled),
}
SAMPLED = {"pyav": pyav_sampled, "torchcodec": torchcodec_sampled}


def floor_seconds(
    pool: multiprocessing.pool.Pool, files: list[str], work=decode_every_frame
) -> tuple[float, int]:
    """Wall time for one process per core (already started) to do `work` (default: decode every frame) on
    `files`, and the frames it counted."""
    start = time.perf_counter()
    frames = sum(pool.map(work, files, chunksize=1))
    return time.perf_counter() - start, frames


@dataclass
class ThroughputRow:
    """Decode throughput of one decoder on one content kind: the 1 fps samples of every file, one single-
    threaded process per core; median of interleaved rounds."""

    input: str
    decoder: str
    sampled_frames: int
    seconds: float
    sampled_per_second: float
    all_seconds: list[float]


def usable_decoders(names: str) -> list[str]:
    """The decoders of `--decoders` that can run here; a line on stderr for each skipped one."""
    usable = []
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        if name not in FLOORS:
            raise SystemExit(f"--decoders: unknown decoder {name!r}; choose from {', '.join(FLOORS)}")
        reason = torchcodec_decode.unavailable_reason() if name == "torchcodec" else None
        if reason is not None:
            print(f"torchcodec skipped: {reason}", file=sys.stderr)
            continue
        usable.append(name)
    return usable


def decode_bound_rows(
    tmp_path: Path, args: argparse.Namespace
) -> tuple[list[DecodeRow], list[ThroughputRow]]:
    """Part 2: cheap models, default decoding workers, each decoder against its decode-only floor; and the
    decoders' sampled-decoding throughput side by side."""
    encoders = {name: load_encoder(name, device=args.device) for name in args.decode_models.split(",")}
    for encoder in encoders.values():  # first-call costs (allocator, threads) are not decoding throughput
        forward_only_fps(encoder, args.batch_size, args.batch_size)
    names = usable_decoders(args.decoders)
    contents = [("smooth H.264 854x480", FrameSource), ("noisy H.264 854x480", NoisyFrameSource)]
    rows, throughput = [], []
    ctx = multiprocessing.get_context("spawn")  # a clean process per core, as a decode-only tool would run
    with ctx.Pool(available_cores()) as pool:
        pool.map(load_decoders, range(available_cores()), chunksize=1)  # processes started, libraries loaded
        for name, kind in contents:
            t0 = time.perf_counter()
            root = make_mp4s(tmp_path / f"decode-{kind.__name__}", args.decode_videos, args.decode_seconds,
                             480, 854, kind)  # fmt: skip
            files = sorted(str(f) for f in (root / "videos").glob("*.mp4"))
            print(f"{name}: data generated in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            floors = {decoder: [floor_seconds(pool, files, FLOORS[decoder][1])] for decoder in names}
            sampled: dict[str, list[tuple[float, int]]] = {decoder: [] for decoder in names}
            runs: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
            for repeat in range(args.repeats):
                for decoder in names:
                    sampled[decoder].append(floor_seconds(pool, files, SAMPLED[decoder]))
                for model, encoder in encoders.items():
                    for decoder in names:
                        adapter = get_dataset("cholec80", root=root)
                        options = ExtractOptions(fps=SAMPLE_FPS, device=args.device, progress=False,
                                                 decoder=decoder)  # fmt: skip
                        store = tmp_path / f"store-{kind.__name__}-{model}-{decoder}-{repeat}"
                        start = time.perf_counter()
                        summary = extract_features(adapter, encoder, store, options)
                        seconds = time.perf_counter() - start
                        if not summary.ok:
                            raise SystemExit(f"extraction failed: {[r.error for r in summary.failed]}")
                        own = floors[decoder]
                        own.append(floor_seconds(pool, files, FLOORS[decoder][1]))
                        runs.setdefault((model, decoder), []).append(
                            (seconds, (own[-2][0] + own[-1][0]) / 2, summary.frames)
                        )
            for (model, decoder), measured in runs.items():
                ratios = [floor / seconds for seconds, floor, _ in measured]
                median = median_run(ratios)
                seconds, floor, frames = measured[median]
                floor_name, floor_frames = FLOORS[decoder][0], floors[decoder][0][1]
                rows.append(DecodeRow(name, model, decoder, floor_name, floor_frames, frames, floor, seconds,
                                      ratios[median], 0.9, ratios))  # fmt: skip
            for decoder, measured in sampled.items():
                times = [seconds for seconds, _ in measured]
                seconds = sorted(times)[len(times) // 2]
                frames = measured[0][1]
                throughput.append(ThroughputRow(name, decoder, frames, seconds, frames / seconds, times))
    return rows, throughput


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
    parts = ("all", "model", "decode", "many")
    parser.add_argument(
        "--part",
        choices=parts,
        default="all",
        help="model: vs forward-only; decode: vs decoding; many: N encoders in one pass vs N runs, floor.",
    )
    parser.add_argument(
        "--many-models",
        default="plstitch-tiny-synthetic,ibot-tiny-synthetic,raw-pixels",
        help="Comma-separated encoders of the one-pass part (default: shipped, no download).",
    )
    parser.add_argument(
        "--device", default="cpu", help="Device of the decode-bound part's model (cuda on a GPU)."
    )
    parser.add_argument(
        "--decode-models",
        default="plstitch-tiny-synthetic,raw-pixels",
        help="Comma-separated cheap models of the decode-bound part (raw-pixels: next to no model work).",
    )
    parser.add_argument("--decode-videos", type=int, default=4, help="Files of the decode-bound part.")
    parser.add_argument("--decode-seconds", type=int, default=60, help="Seconds per file (25 fps source).")
    parser.add_argument(
        "--decoders",
        default="pyav,torchcodec",
        help="Decoders of the decode-bound part, comma-separated (torchcodec: CPU; skipped if missing).",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.videos, args.seconds, args.repeats, args.decode_seconds = 2, 16, 1, 10
    return args


def model_bound_rows(tmp_path: Path, args: argparse.Namespace) -> list[Row]:
    """Part 1: timm ViT-S/16 (random init), end-to-end against forward-only, two input kinds."""
    torch.manual_seed(0)
    model = timm.create_model(args.model, pretrained=False, num_classes=0).eval()
    encoder = Encoder(model, DataConfig(), {"spec": f"timm:{args.model} (random init)", "sha256": None})
    t0 = time.perf_counter()
    folders = make_frame_folders(tmp_path / "autolaparo", args.videos, args.seconds, args.height, args.width)
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
    frames = 0
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
        best = median_run(ratios)
        rows.append(Row(name, frames, pairs[best][0], pairs[best][1], ratios[best], target, ratios))
    return rows


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="plstitch-bench-") as tmp:
        rows = model_bound_rows(Path(tmp), args) if args.part in ("all", "model") else []
        decode_rows, throughput = (
            decode_bound_rows(Path(tmp), args) if args.part in ("all", "decode") else ([], [])
        )
        passes = sibling("extract_passes") if args.part in ("all", "many") else None
        many = []
        if passes is not None:
            root = make_mp4s(Path(tmp) / "many", args.videos, args.seconds, args.height, args.width)
            many = passes.many_rows(root, args)
    if args.json:
        print(json.dumps({"settings": vars(args), "rows": [asdict(r) for r in rows],
                          "decode_bound": [asdict(r) for r in decode_rows],
                          "decode_throughput": [asdict(r) for r in throughput],
                          "one_pass": [asdict(r) for r in many]}, indent=2))  # fmt: skip
        return
    if rows:
        print_model_rows(rows, args)
    if decode_rows:
        print_decode_rows(decode_rows, args)
    if throughput:
        print_throughput_rows(throughput)
    if many:
        passes.print_many_rows(many, args)


def sibling(name: str) -> ModuleType:
    """Another script of benchmarks/ as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        f"_benchmarks_{name}", Path(__file__).with_name(f"{name}.py")
    )
    if spec is None or spec.loader is None:
        raise SystemExit(f"benchmarks/{name}.py is missing next to benchmarks/extract.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def median_run(ratios: list[float]) -> int:
    """Index of the median round (by ratio) of interleaved rounds."""
    return sorted(range(len(ratios)), key=lambda i: ratios[i])[len(ratios) // 2]


def verdict(ratio: float, target: float, all_ratios: list[float]) -> str:
    """The ratio, its target, ok/BELOW and every round's ratio (the tail of a printed row)."""
    runs = ", ".join(f"{x:.2f}" for x in all_ratios)
    return f"{ratio:>6.2f} >={target} {'ok' if ratio >= target else 'BELOW'}  (runs: {runs})"


def print_model_rows(rows: list[Row], args: argparse.Namespace) -> None:
    print(
        f"model {args.model} (random init), batch {args.batch_size}, {args.num_workers} decoding "
        f"worker(s), {torch.get_num_threads()} torch threads, source {args.width}x{args.height}, "
        f"resize_on_decode={args.resize_on_decode}"
    )
    header = f"{'input':<30} {'frames':>6} {'end-to-end f/s':>15} {'forward-only f/s':>17} {'ratio':>6}"
    print(header + " target")
    for r in rows:
        print(
            f"{r.input:<30} {r.frames:>6} {r.end_to_end_fps:>15.2f} {r.forward_only_fps:>17.2f} "
            + verdict(r.ratio, r.target, r.all_ratios)
        )


def print_decode_rows(rows: list[DecodeRow], args: argparse.Namespace) -> None:
    print(
        f"decode-bound: model on {args.device}, default decoding workers, "
        f"{args.decode_videos} x {args.decode_seconds} s at {SOURCE_FPS} fps sampled at {SAMPLE_FPS:g} fps; "
        f"floor = {available_cores()} single-threaded processes of the same decoder (PyAV: every frame; "
        "TorchCodec: the samples)"
    )
    header = (
        f"{'input':<22} {'model':<24} {'decoder':<10} {'floor':<18} {'decoded':>7} {'sampled':>7} "
        f"{'floor s':>8} {'extract s':>9}"
    )
    print(f"{header} {'ratio':>6} target")
    for d in rows:
        print(
            f"{d.input:<22} {d.model:<24} {d.decoder:<10} {d.floor:<18} {d.frames_decoded_by_floor:>7} "
            f"{d.sampled_frames:>7} {d.floor_seconds:>8.2f} {d.extract_seconds:>9.2f} "
            + verdict(d.ratio, d.target, d.all_ratios)
        )


def print_throughput_rows(rows: list[ThroughputRow]) -> None:
    """Decode throughput side by side: each decoder's 1 fps samples, and TorchCodec / PyAV in time."""
    print(
        f"decode throughput: the {SAMPLE_FPS:g} fps RGB samples of the same files, {available_cores()} "
        "single-threaded processes, median of rounds"
    )
    header = f"{'input':<22} {'decoder':<10} {'sampled':>7} {'seconds':>8} {'samples/s':>9}"
    print(f"{header}  vs pyav (time)  rounds")
    pyav = {r.input: r.seconds for r in rows if r.decoder == "pyav"}
    for r in rows:
        versus = f"{r.seconds / pyav[r.input]:>6.2f}x" if r.input in pyav else "     -"
        runs = ", ".join(f"{x:.2f}" for x in r.all_seconds)
        print(
            f"{r.input:<22} {r.decoder:<10} {r.sampled_frames:>7} {r.seconds:>8.2f} "
            f"{r.sampled_per_second:>9.1f}  {versus:<14}  ({runs})"
        )


if __name__ == "__main__":
    main()
