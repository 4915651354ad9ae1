"""GPU throughput on one CUDA machine, each comparison side by side in one run (issue 30).

1. Extraction frames/s of a ViT-B/16 (timm, random init, bf16 autocast, batch 256) on generated 854x480 25 fps
   H.264 files (Cholec80 layout, PyAV's encoder, sampled at `--fps`): PyAV decoding on the CPU (extraction's
   default workers: one per core), TorchCodec decoding with NVDEC (main process; frames resized and cropped on
   the GPU) and TorchCodec on the CPU, against the model-forward-only floor (the same normalise + forward on
   uint8 batches already on the GPU). Extraction is timed end to end (store writes included), median of
   `--repeats` interleaved rounds after a warm-up run.
2. The `paper-vitb16` training step (the preset; full objective with the jigsaw branch on, bf16 autocast) at
   `--train-batch-size` on one GPU, batches already on the device, in `--train-variants` side by side from the
   same weights on the same batches (`benchmarks/gpu_train.py`): `before` (the step before issue 45),
   `after` (the trainer's step: fused AdamW, foreach clipping and EMA, one host sync) and `after+compile`:
   s/step, images/s (every image of the batch: clip, iBOT crops, jigsaw context), peak memory, model FLOP
   utilisation = FLOPs of a forward + backward (torch's FlopCounterMode) / s/step / the GPU's peak dense bf16
   FLOP/s (known for H100/H200/A100, else `--peak-tflops`), and each variant's losses against `before`'s
   step by step. `--profile FILE`: torch.profiler over two `after` steps, where the time goes (per phase and
   per kernel class, the GPU's busy share; the profiler's table in FILE).
3. k-NN on the GPU (`knn_predict`, CUDA: blocked matmul + top-k, features copied from the host) against its
   bare similarity GEMM on the GPU (features already there) and the same GEMM plus the host-to-device copy of
   the features; identical query blocks (`plstitch_eval.knn_vote.block_rows`); predictions against the CPU
   path (FAISS) on 50,000 x 5,000 of them.
4. `--parts nvdec` (not in the default parts): PyAV's own NVDEC (`plstitch_eval.data.pyav_cuda`, frames left
   on the GPU as uint8 RGB) against PyAV on the CPU (host RGB; FFmpeg threads on every core, and one thread as
   each of extraction's per-core workers decodes) on one generated 854x480 25 fps H.264 file of `--seconds`:
   decoded frames/s every frame and sampled at `--fps`, median of `--repeats` interleaved rounds after a
   warm-up; then a parity check, NVDEC against the CPU path: the same frame times (so indices) every frame and
   at `--fps`, and the max / mean pixel difference at full size and with a resize on decode to 224. Skipped
   with a line saying why without CUDA, without NVDEC in the PyAV build or when NVDEC cannot decode the file.

    pip install -e ".[torchcodec]"            # and a system FFmpeg 4-8 for the TorchCodec rows
    python benchmarks/gpu.py --out gpu.json   # prints the three tables, writes every figure as JSON
    python benchmarks/gpu.py --parts nvdec --seconds 30   # PyAV NVDEC against PyAV on the CPU

Without a CUDA device it prints one line saying so and exits with status 2 (nothing measured; 0 would read as
a run). TorchCodec rows are skipped with a line saying why when TorchCodec or FFmpeg is missing; whether NVDEC
decoded or TorchCodec fell back to the CPU is printed. Argument parsing and video generation need no GPU
(tests/benchmarks/test_gpu.py). Reuses `benchmarks/extract.py` (video generation), `benchmarks/train_step.py`
(synthetic frames, the trainer's loader, FLOP counting) and `benchmarks/knn.py` (interleaved timing).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import av
import numpy as np
import torch

from plstitch_eval.data import pyav_cuda, torchcodec_decode, video
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.errors import DecodeError
from plstitch_eval.extract import ExtractOptions, available_cores, extract_features
from plstitch_eval.hub import DataConfig, Encoder
from plstitch_eval.knn_vote import KnnConfig, block_rows, knn_predict
from plstitch_eval.preprocess import frame_plan, normalize_crops

HERE = Path(__file__).resolve().parent
NO_CUDA_EXIT = 2
HEIGHT, WIDTH = 480, 854
PEAK_BF16_TFLOPS = (("H200", 989.4), ("H100 PCIe", 756.0), ("H100", 989.4), ("A100", 312.0))  # dense
TRAIN_VARIANTS = ("before", "after", "after+compile")  # benchmarks/gpu_train.py
TRAIN_WARMUP = 3  # steps per training variant not timed (compile, cuDNN/cuBLAS choices, allocator)
EXTRACT_RUNS = (  # (row name, decoder, decode device)
    ("PyAV (CPU workers)", "pyav", "cpu"),
    ("PyAV NVDEC", "pyav", "cuda"),
    ("TorchCodec NVDEC", "torchcodec", "cuda"),
    ("TorchCodec CPU", "torchcodec", "cpu"),
)


def sibling(name: str) -> ModuleType:
    """Another script of benchmarks/ as a module (they are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"_benchmarks_{name}", HERE / f"{name}.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"benchmarks/{name}.py is missing next to benchmarks/gpu.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="Write every figure (and the settings) to this JSON file.")
    parser.add_argument(
        "--parts",
        default="extract,train,knn",
        help="Comma-separated: extract, train, knn, nvdec, passes (several encoders in one pass, the cache).",
    )
    parser.add_argument("--videos", type=int, default=16, help="Generated H.264 files (854x480, 25 fps).")
    parser.add_argument("--seconds", type=int, default=60, help="Seconds per file.")
    parser.add_argument("--fps", type=float, default=1.0, help="Extraction sampling rate (frames/s).")
    parser.add_argument("--batch-size", type=int, default=256, help="Extraction and forward-floor batch.")
    parser.add_argument("--repeats", type=int, default=3, help="Interleaved rounds; the median is shown.")
    parser.add_argument("--train-batch-size", type=int, default=64, help="Items per training step.")
    parser.add_argument(
        "--train-steps", type=int, default=20, help="Training steps per variant (the first 3 not timed)."
    )
    parser.add_argument(
        "--train-variants",
        default="before,after,after+compile",
        help="Comma-separated training variants: before (the step before issue 45), after, after+compile.",
    )
    parser.add_argument(
        "--profile", type=Path, help="Profile the 'after' step; the profiler's table goes to this file."
    )
    parser.add_argument("--peak-tflops", type=float, help="The GPU's peak dense bf16 TFLOP/s (for MFU).")
    parser.add_argument("--knn-train", type=int, default=200_000, help="k-NN training features.")
    parser.add_argument("--knn-queries", type=int, default=20_000, help="k-NN query features.")
    parser.add_argument("--knn-dim", type=int, default=768)
    parser.add_argument("--device", default="cuda", help="The CUDA device (cuda or cuda:N).")
    parser.add_argument(
        "--pass-models", type=int, default=9, help="Encoders extracted in one pass (--parts passes)."
    )
    args = parser.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = sorted(set(parts) - {"extract", "train", "knn", "nvdec", "passes"})
    if unknown or not parts:
        parser.error(f"--parts takes extract, train, knn, nvdec and/or passes (got {args.parts!r})")
    if min(args.videos, args.seconds, args.batch_size, args.repeats, args.train_batch_size) < 1:
        parser.error("--videos, --seconds, --batch-size, --repeats and --train-batch-size must be >= 1")
    if not args.fps > 0:
        parser.error(f"--fps must be > 0 (got {args.fps})")
    variants = [v.strip() for v in args.train_variants.split(",") if v.strip()]
    if not variants or set(variants) - set(TRAIN_VARIANTS):
        parser.error(f"--train-variants takes {', '.join(TRAIN_VARIANTS)} (got {args.train_variants!r})")
    if args.train_steps <= TRAIN_WARMUP:
        parser.error(f"--train-steps must be > {TRAIN_WARMUP} (the warm-up steps)")
    args.parts, args.train_variants = parts, variants
    return args


def require_cuda(device: str) -> torch.device:
    """The CUDA device to measure on; without one, one line on stderr and exit status 2."""
    if not torch.cuda.is_available():
        print(
            "benchmarks/gpu.py: no CUDA device here (torch.cuda.is_available() is False), nothing measured; "
            'run it on a GPU machine: pip install -e ".[torchcodec]" && '
            "python benchmarks/gpu.py --out gpu.json",
            file=sys.stderr,
        )
        raise SystemExit(NO_CUDA_EXIT)
    return torch.device(device)


def generate_videos(
    root: Path, n_videos: int, seconds: int, height: int = HEIGHT, width: int = WIDTH
) -> Path:
    """Cholec80 layout of `n_videos` smooth-content H.264 files (PyAV's libx264, 25 fps, width x height)."""
    return sibling("extract").make_mp4s(root, n_videos, seconds, height, width)


# ------------------------------------------------------------------------------------------- extraction


def vit_b16(device: torch.device) -> Encoder:
    """timm's ViT-B/16 at 224 px with random weights (no download), in eval mode on `device`."""
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_base_patch16_224", pretrained=False, num_classes=0).eval()
    return Encoder(model, DataConfig(), {"spec": "timm:vit_base_patch16_224 (random init)"}).to(device)


def forward_floor(encoder: Encoder, batch_size: int, n_frames: int, device: torch.device) -> float:
    """Frames/s of normalise + bf16 forward on uint8 batches already on the GPU (extraction less decoding;
    fp32 on a CPU device, for the CPU smoke test)."""
    plan = frame_plan(encoder.data_config)
    images = torch.randint(0, 256, (batch_size, 3, *plan.crop), dtype=torch.uint8, device=device)
    n_batches = max(1, round(n_frames / batch_size))
    cuda = device.type == "cuda"
    with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
        encoder(normalize_crops(images, plan))  # warm-up
        if cuda:
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(n_batches):
            encoder(normalize_crops(images, plan)).float()
        if cuda:
            torch.cuda.synchronize(device)
    return n_batches * batch_size / (time.perf_counter() - start)


def nvdec_status(path: Path, device: torch.device) -> str:
    """Whether TorchCodec decodes `path` with NVDEC here or fell back to the CPU (its own words)."""
    video = torchcodec_decode.TorchcodecVideo(path, device=device)
    next(video.frames(None))
    return str(video.decoder.cpu_fallback)


def timed_extraction(adapter: Any, encoder: Encoder, out: Path, options: ExtractOptions) -> tuple[float, int]:
    """(seconds, frames) of one end-to-end `extract_features` run into a new store."""
    start = time.perf_counter()
    summary = extract_features(adapter, encoder, out, options)
    seconds = time.perf_counter() - start
    if not summary.ok:
        raise SystemExit(f"extraction failed: {[r.error for r in summary.failed]}")
    return seconds, summary.frames


def extraction_rows(root: Path, encoder: Encoder, args: argparse.Namespace, device: torch.device) -> dict:
    """Part 1: each decoding path's end-to-end frames/s against the forward-only floor, interleaved."""
    adapter = get_dataset("cholec80", root=root)
    runs = list(EXTRACT_RUNS)
    reason = torchcodec_decode.unavailable_reason()
    notes = {}
    if reason is not None:
        print(f"TorchCodec rows skipped: {reason}", file=sys.stderr)
        runs = [run for run in runs if run[1] != "torchcodec"]
    else:
        try:
            notes["nvdec"] = nvdec_status(next((root / "videos").glob("*.mp4")), device)
        except (DecodeError, RuntimeError) as exc:  # a TorchCodec or FFmpeg without CUDA support
            print(f"TorchCodec NVDEC row skipped: {exc}", file=sys.stderr)
            runs = [run for run in runs if run[1:] != ("torchcodec", "cuda")]
    if (why := pyav_cuda.nvdec_unavailable_reason()) is not None:
        print(f"PyAV NVDEC row skipped: {why}", file=sys.stderr)
        runs = [run for run in runs if run[1:] != ("pyav", "cuda")]
    common = {"fps": args.fps, "batch_size": args.batch_size, "device": str(device), "precision": "bf16"}
    options = {
        name: ExtractOptions(**common, decoder=decoder, decode_device=where, progress=False)
        for name, decoder, where in runs
    }
    measured: dict[str, list[tuple[float, int]]] = {name: [] for name in options}
    floors = []
    with tempfile.TemporaryDirectory(prefix="plstitch-gpu-stores-") as tmp:
        first = [adapter.videos()[0].name]
        for index, option in enumerate(
            options.values()
        ):  # first-call costs (cuDNN, NVDEC) are not throughput
            warm = ExtractOptions(**{**vars(option), "videos": first})
            timed_extraction(adapter, encoder, Path(tmp) / f"warm-{index}", warm)
        for repeat in range(args.repeats):
            for index, (name, option) in enumerate(options.items()):
                out = Path(tmp) / f"run-{repeat}-{index}"
                measured[name].append(timed_extraction(adapter, encoder, out, option))
            frames = max(4 * args.batch_size, measured[runs[0][0]][-1][1])
            floors.append(forward_floor(encoder, args.batch_size, frames, device))
    floor = float(np.median(floors))
    rows = []
    for name, decoder, where in runs:
        rates = [frames / seconds for seconds, frames in measured[name]]
        rate = float(np.median(rates))
        rows.append(
            {
                "decoding": name,
                "decoder": decoder,
                "decode_device": where,
                "frames": measured[name][0][1],
                "frames_per_second": rate,
                "of_forward_floor": rate / floor,
                "all_frames_per_second": rates,
            }
        )
    return {"forward_floor_frames_per_second": floor, "rows": rows, **notes}


def print_extraction(result: dict, args: argparse.Namespace) -> None:
    print(
        f"extraction: ViT-B/16 bf16, batch {args.batch_size}, {args.videos} x {args.seconds} s 854x480 H.264 "
        f"at 25 fps sampled at {args.fps:g} fps, {available_cores()} CPU cores, median of {args.repeats} "
        "rounds"
    )
    print(f"{'decoding':<22} {'frames':>7} {'frames/s':>9} {'of floor':>8}  rounds (frames/s)")
    for row in result["rows"]:
        runs = ", ".join(f"{x:.0f}" for x in row["all_frames_per_second"])
        print(
            f"{row['decoding']:<22} {row['frames']:>7} {row['frames_per_second']:>9.1f} "
            f"{row['of_forward_floor']:>8.2f}  ({runs})"
        )
    print(f"{'forward-only floor':<22} {'':>7} {result['forward_floor_frames_per_second']:>9.1f} {1.0:>8.2f}")
    if "nvdec" in result:
        print(f"NVDEC: {result['nvdec']}")


# --------------------------------------------------------------------------------------------- training


def peak_flops(device: torch.device, override_tflops: float | None) -> float | None:
    """The GPU's peak dense bf16 FLOP/s: `--peak-tflops`, else by its name (None when unknown)."""
    if override_tflops:
        return override_tflops * 1e12
    name = torch.cuda.get_device_name(device)
    return next((tflops * 1e12 for key, tflops in PEAK_BF16_TFLOPS if key in name), None)


def training_rows(args: argparse.Namespace, device: torch.device) -> dict:
    """Part 2: the paper-vitb16 step on one GPU, batches already there: before / after issue 45 (and with
    --compile), side by side from the same weights on the same batches; losses compared step by step."""
    from itertools import islice

    from plstitch_train.model import PLStitchModel
    from plstitch_train.presets import get_preset

    steps_bench, train_bench = sibling("train_step"), sibling("gpu_train")
    config = get_preset("paper-vitb16").replace(
        data="-", batch_size=args.train_batch_size, num_workers=2, device=str(device), precision="bf16"
    )
    torch.manual_seed(0)
    model = PLStitchModel(config).train()
    n_videos = max(4, -(-3 * args.train_batch_size // min(config.clips_per_video)))  # three batches of clips
    store = steps_bench.synthetic_store(n_videos=n_videos, n_frames=160, size=config.frame_size)
    loader = steps_bench.make_loader(config, store, model)  # its workers fork before CUDA starts
    batches = list(islice(loader, 3))
    del model
    bench = train_bench.Bench.build(config, batches, device, "bf16")
    flop_model = bench.fresh_model()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        flops = steps_bench.step_flops(flop_model, bench.batches[0])
    del flop_model
    torch.cuda.empty_cache()
    first = bench.batches[0]
    images = sum(first[key].shape[1] for key in ("clip", "crops", "context") if key in first)
    peak = peak_flops(device, args.peak_tflops)
    result: dict[str, Any] = {
        "batch_size": args.train_batch_size,
        "images_per_item": images,
        "tflops_per_step": flops / 1e12,
        "peak_tflops": None if peak is None else peak / 1e12,
        "steps": args.train_steps,
        "warmup": TRAIN_WARMUP,
        "variants": {},
    }
    eager = [v for v in args.train_variants if "compile" not in v]
    for name in eager:
        run_training_variant(args, train_bench, bench, name, (flops, images), result)
    if args.profile is not None:  # before compiling: a compile that runs out of time loses no profile
        name = next((v for v in ("after", "before") if v in args.train_variants), "after")
        summary, table = train_bench.profile_step(bench, name)
        args.profile.write_text(table)
        result["profile"] = summary
        train_bench.print_profile(summary)
        save_report(args, {"train": result})
    for name in (v for v in args.train_variants if v not in eager):
        run_training_variant(args, train_bench, bench, name, (flops, images), result)
    reference = result["variants"].get("before", {}).get("losses")
    for name, row in result["variants"].items():
        if reference and row.get("losses") and name != "before":
            agreement = train_bench.loss_agreement(reference, row["losses"])
            row["max_relative_loss_difference_vs_before"] = agreement
    return result


def run_training_variant(
    args: argparse.Namespace,
    train_bench: ModuleType,
    bench: Any,
    name: str,
    work: tuple[int, int],
    result: dict,
) -> None:
    """Measure one training variant into `result["variants"]` (`work`: FLOPs and images per step) and save
    the report so far."""
    flops, images = work
    peak = None if result["peak_tflops"] is None else result["peak_tflops"] * 1e12
    try:
        row = train_bench.run_variant(bench, name, args.train_steps, TRAIN_WARMUP)
    except Exception as exc:  # noqa: BLE001 - one variant failing (say, compile) must not lose the others
        print(f"training variant {name!r} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        result["variants"][name] = {"error": f"{type(exc).__name__}: {exc}"}
        return
    finally:
        torch.cuda.empty_cache()
    row["images_per_second"] = args.train_batch_size * images / row["s_per_step"]
    row["achieved_tflops"] = flops / row["s_per_step"] / 1e12
    row["mfu"] = None if peak is None else flops / row["s_per_step"] / peak
    result["variants"][name] = row
    print_training_variant(result, name)
    save_report(args, {"train": result})  # a later variant that fails or runs out of time loses nothing


def print_training_variant(result: dict, name: str) -> None:
    row = result["variants"][name]
    mfu = "unknown GPU: pass --peak-tflops" if row["mfu"] is None else f"{100 * row['mfu']:.1f} %"
    memory = "n/a" if row["peak_memory_gib"] is None else f"{row['peak_memory_gib']:.1f} GiB"
    print(
        f"paper-vitb16 step '{name}', batch {result['batch_size']} ({result['images_per_item']} images per "
        f"item), bf16: {row['s_per_step']:.3f} s/step, {row['images_per_second']:.0f} images/s, peak memory "
        f"{memory}, {result['tflops_per_step']:.2f} TFLOP/step, "
        f"{row['achieved_tflops']:.0f} TFLOP/s, MFU {mfu} (warm-up {row['warmup_s']:.1f} s)"
    )


def print_training(result: dict) -> None:
    for name, row in result["variants"].items():
        if "error" in row:
            print(f"paper-vitb16 step '{name}': failed ({row['error']})")
            continue
        print_training_variant(result, name)
        diff = row.get("max_relative_loss_difference_vs_before")
        if diff:
            text = ", ".join(f"{k} {v:.2e}" for k, v in diff.items())
            n_steps = len(row["losses"])
            print(f"  losses over {n_steps} steps, largest relative difference from before: {text}")


def save_report(args: argparse.Namespace, report: dict) -> None:
    """Write what is measured so far (a later part that runs out of time loses nothing)."""
    if args.out is not None:
        old = json.loads(args.out.read_text()) if args.out.is_file() else {}
        args.out.write_text(json.dumps({**old, **report}, indent=2))


# --------------------------------------------------------------------------------------------------- k-NN


def knn_rows(args: argparse.Namespace, device: torch.device) -> dict:
    """Part 3: `knn_predict` on CUDA against its GEMM (features on the GPU) and GEMM + copy."""
    knn_bench = sibling("knn")
    rng = np.random.default_rng(0)
    train = rng.normal(size=(args.knn_train, args.knn_dim)).astype(np.float32)
    labels = rng.integers(0, 48, args.knn_train)
    queries = rng.normal(size=(args.knn_queries, args.knn_dim)).astype(np.float32)
    train_n = train / np.linalg.norm(train, axis=1, keepdims=True)
    queries_n = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    config = KnnConfig(k=20, device=str(device))
    rows = block_rows(args.knn_train, config.chunk_size)
    bank_t = torch.from_numpy(train_n).to(device).T
    on_gpu = torch.from_numpy(queries_n).to(device)

    def gemm(bank_t: torch.Tensor, queries: torch.Tensor) -> None:
        buf = torch.empty((min(rows, len(queries)), bank_t.shape[1]), device=device)
        for start in range(0, len(queries), rows):
            block = queries[start : start + rows]
            torch.mm(block, bank_t, out=buf[: len(block)])
        torch.cuda.synchronize(device)

    def gemm_with_copy() -> None:
        gemm(torch.from_numpy(train_n).to(device).T, torch.from_numpy(queries_n).to(device))

    runs = {
        "gemm": (gemm, (bank_t, on_gpu)),
        "gemm+copy": (gemm_with_copy, ()),
        "knn_predict": (knn_predict, (train, labels, queries, config)),
    }
    knn_predict(train[:1000], labels[:1000], queries[:100], config)  # CUDA context and kernels warm
    best = knn_bench.interleaved_best(args.repeats, runs)
    seconds = {name: wall for name, (_, wall, _) in best.items()}
    parity = knn_parity(train, labels, queries, device)
    return {"rows_per_block": rows, "seconds": seconds, "parity": parity,
            "knn_over_gemm": seconds["knn_predict"] / seconds["gemm"],
            "knn_over_gemm_with_copy": seconds["knn_predict"] / seconds["gemm+copy"]}  # fmt: skip


def knn_parity(train: np.ndarray, labels: np.ndarray, queries: np.ndarray, device: torch.device) -> dict:
    """CUDA k-NN predictions against the CPU path (FAISS) on 50,000 of the training rows and 5,000 queries."""
    train, labels, queries = train[:50_000], labels[:50_000], queries[:5_000]
    try:
        cpu = knn_predict(train, labels, queries, KnnConfig(k=20))
    except ImportError as exc:  # no FAISS on this machine
        return {"skipped": f"no CPU reference: {exc}"}
    gpu = knn_predict(train, labels, queries, KnnConfig(k=20, device=str(device)))
    return {"queries": len(queries), "same_predictions": int((cpu == gpu).sum())}


def print_knn(result: dict, args: argparse.Namespace) -> None:
    s = result["seconds"]
    print(
        f"k-NN on GPU: {args.knn_train} x {args.knn_dim} train, {args.knn_queries} queries, k=20, blocks of "
        f"{result['rows_per_block']}, best of {args.repeats}: GEMM {s['gemm']:.3f} s, GEMM + copy "
        f"{s['gemm+copy']:.3f} s, knn_predict {s['knn_predict']:.3f} s = {result['knn_over_gemm']:.2f}x the "
        f"GEMM, {result['knn_over_gemm_with_copy']:.2f}x GEMM + copy"
    )
    parity = result["parity"]
    if "skipped" in parity:
        print(f"k-NN parity with the CPU path: skipped ({parity['skipped']})")
    else:
        print(f"k-NN parity with the CPU path (FAISS): {parity['same_predictions']} of {parity['queries']} "
              "predictions identical")  # fmt: skip


# -------------------------------------------------------------------------------------------------- NVDEC

NVDEC_RESIZE = 224  # the parity check's resize on decode (shorter side)


def nvdec_skip_reason(path: Path, device: torch.device) -> str | None:
    """Why PyAV's NVDEC cannot be measured here (None when it decodes `path` on `device`)."""
    reason = pyav_cuda.nvdec_unavailable_reason()
    if reason is None and not pyav_cuda.nvdec_decodes(path, device):
        reason = "NVDEC does not decode the generated H.264 here (a driver without libnvcuvid?)"
    return reason


def decode_cpu(path: Path, fps: float | None, threads: int) -> int:
    """Frames PyAV's CPU path gives (host RGB), decoded with `threads` FFmpeg threads (0: every core)."""
    return sum(1 for _ in video.read_frames(path, fps, threads=threads))


def decode_nvdec(path: Path, fps: float | None, device: torch.device) -> int:
    """Frames PyAV's NVDEC path gives (RGB on the GPU), the GPU's work finished."""
    n_frames = sum(len(times) for times, _ in pyav_cuda.decode_batches(path, fps, device=device))
    torch.cuda.synchronize(device)
    return n_frames


def nvdec_parity(path: Path, fps: float | None, size: int | None, device: torch.device) -> dict:
    """NVDEC against the CPU path, frame by frame: the same times (so indices), pixel differences."""
    cpu = iter(video.read_frames(path, fps, size))
    n_frames, same_times, max_diff, total, values = 0, True, 0, 0.0, 0
    for times, images in pyav_cuda.decode_batches(path, fps, size, device=device):
        for time_s, image in zip(times, images, strict=True):
            frame = next(cpu, None)
            if frame is None or frame.time != time_s:
                same_times = False
                break
            theirs = torch.from_numpy(frame.image).to(device).permute(2, 0, 1)
            diff = (image.int() - theirs.int()).abs()
            max_diff = max(max_diff, int(diff.max()))
            total += float(diff.sum())
            values += diff.numel()
            n_frames += 1
        if not same_times:
            break
    same_times = same_times and next(cpu, None) is None
    return {
        "frames": n_frames,
        "same_times": same_times,
        "max_diff": max_diff,
        "mean_diff": total / max(1, values),
    }


def nvdec_rows(path: Path, args: argparse.Namespace, device: torch.device) -> dict:
    """Part 4: PyAV NVDEC against PyAV on the CPU on one file, interleaved; then the parity check."""
    reason = nvdec_skip_reason(path, device)
    if reason is not None:
        print(f"NVDEC part skipped: {reason}", file=sys.stderr)
        return {"skipped": reason}
    runs = {
        "PyAV CPU, all cores": lambda fps: decode_cpu(path, fps, 0),
        "PyAV CPU, 1 thread": lambda fps: decode_cpu(path, fps, 1),
        "PyAV NVDEC": lambda fps: decode_nvdec(path, fps, device),
    }
    modes = {"every frame": None, f"at {args.fps:g} fps": args.fps}
    for run in runs.values():  # first-call costs (CUDA context, NVDEC session, threads) are not throughput
        run(args.fps)
    measured: dict[tuple[str, str], list[tuple[float, int]]] = {(r, m): [] for r in runs for m in modes}
    for _ in range(args.repeats):
        for mode, fps in modes.items():
            for name, run in runs.items():
                start = time.perf_counter()
                frames = run(fps)
                measured[name, mode].append((time.perf_counter() - start, frames))
    rows = []
    for (name, mode), results in measured.items():
        rates = [frames / seconds for seconds, frames in results]
        rate = float(np.median(rates))
        realtime = float(np.median([args.seconds / seconds for seconds, _ in results]))  # video s per s
        rows.append({"decoding": name, "mode": mode, "frames": results[0][1], "frames_per_second": rate,
                     "x_realtime": realtime, "all_frames_per_second": rates})  # fmt: skip
    parity = {mode: nvdec_parity(path, fps, None, device) for mode, fps in modes.items()}
    parity[f"resize {NVDEC_RESIZE}, at {args.fps:g} fps"] = nvdec_parity(path, args.fps, NVDEC_RESIZE, device)
    return {"file": f"{args.seconds} s of 854x480 H.264 at 25 fps", "rows": rows, "parity": parity}


def print_nvdec(result: dict, args: argparse.Namespace) -> None:
    if "skipped" in result:
        print(f"NVDEC: skipped ({result['skipped']})")
        return
    print(f"NVDEC through PyAV (av {av.__version__}): {result['file']}, median of {args.repeats} rounds")
    print(
        f"{'decoding':<22} {'mode':<14} {'frames':>7} {'frames/s':>9} {'x realtime':>10}  rounds (frames/s)"
    )
    for row in result["rows"]:
        runs = ", ".join(f"{x:.0f}" for x in row["all_frames_per_second"])
        name, mode, rate, realtime = row["decoding"], row["mode"], row["frames_per_second"], row["x_realtime"]
        print(f"{name:<22} {mode:<14} {row['frames']:>7} {rate:>9.1f} {realtime:>10.1f}  ({runs})")
    for mode, check in result["parity"].items():
        same = "same frame times" if check["same_times"] else "FRAME TIMES DIFFER"
        print(
            f"parity, {mode}: {check['frames']} frames, {same}, pixels max {check['max_diff']} / mean "
            f"{check['mean_diff']:.3f} grey levels apart (NVDEC - CPU path)"
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = require_cuda(args.device)
    report: dict[str, Any] = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "gpu": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
    }
    print(f"GPU: {report['gpu']}, torch {torch.__version__}, {available_cores()} CPU cores")
    if args.out is not None:
        args.out.write_text(json.dumps(report, indent=2))  # this run's figures only, saved part by part
    parts = {"extract": extract_part, "train": train_part, "knn": knn_part, "passes": passes_part,
             "nvdec": nvdec_part}  # fmt: skip
    for part in args.parts:  # in the order given, each saved as soon as it is measured
        parts[part](args, device, report)
        save_report(args, report)
    if args.out is not None:
        print(f"figures written to {args.out}", file=sys.stderr)


def extract_part(args: argparse.Namespace, device: torch.device, report: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="plstitch-gpu-") as tmp:
        start = time.perf_counter()
        root = generate_videos(Path(tmp) / "cholec80", args.videos, args.seconds)
        print(f"videos generated in {time.perf_counter() - start:.1f} s", file=sys.stderr)
        report["extract"] = extraction_rows(root, vit_b16(device), args, device)
    print_extraction(report["extract"], args)


def train_part(args: argparse.Namespace, device: torch.device, report: dict) -> None:
    report["train"] = training_rows(args, device)
    print_training(report["train"])


def knn_part(args: argparse.Namespace, device: torch.device, report: dict) -> None:
    report["knn"] = knn_rows(args, device)
    print_knn(report["knn"], args)


def passes_part(args: argparse.Namespace, device: torch.device, report: dict) -> None:
    passes = sibling("gpu_passes")
    with tempfile.TemporaryDirectory(prefix="plstitch-gpu-passes-") as tmp:
        root = generate_videos(Path(tmp) / "cholec80", args.videos, args.seconds)
        report["passes"] = passes.passes_rows(root, lambda: vit_b16(device), forward_floor, args, device)
    passes.print_passes(report["passes"], args)


def nvdec_part(args: argparse.Namespace, device: torch.device, report: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="plstitch-gpu-nvdec-") as tmp:
        root = generate_videos(Path(tmp) / "cholec80", 1, args.seconds)
        report["nvdec"] = nvdec_rows(next((root / "videos").glob("*.mp4")), args, device)
    print_nvdec(report["nvdec"], args)


if __name__ == "__main__":
    main()
