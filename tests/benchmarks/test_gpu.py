"""`benchmarks/gpu.py` without a GPU: its arguments, the H.264 files it generates, and its no-CUDA exit."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import av
import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu.py"


@pytest.fixture(scope="module")
def gpu():
    spec = importlib.util.spec_from_file_location("_benchmarks_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_arguments(gpu):
    args = gpu.parse_args([])
    assert args.parts == ["extract", "train", "knn"] and args.batch_size == 256 and args.out is None
    args = gpu.parse_args(["--parts", "knn, extract", "--videos", "2", "--out", "g.json", "--fps", "0.5"])
    assert args.parts == ["knn", "extract"] and args.videos == 2 and args.out == Path("g.json")
    for bad in (["--parts", "decode"], ["--fps", "0"], ["--videos", "0"]):
        with pytest.raises(SystemExit) as info:
            gpu.parse_args(bad)
        assert info.value.code == 2


def test_generated_videos_are_854x480_h264(gpu, tmp_path):
    root = gpu.generate_videos(tmp_path / "c80", n_videos=1, seconds=1)
    (video,) = sorted((root / "videos").glob("*.mp4"))
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264" and (stream.width, stream.height) == (854, 480)
        assert sum(1 for _ in container.decode(stream)) == 25  # 1 s at 25 fps
    assert (root / "phase_annotations" / f"{video.stem}-phase.txt").is_file()  # the Cholec80 layout


def test_without_cuda_it_says_so_and_exits_2(gpu, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as info:
        gpu.main(["--parts", "knn"])
    assert info.value.code == gpu.NO_CUDA_EXIT == 2
    err = capsys.readouterr().err.strip()
    assert "no CUDA device" in err and "python benchmarks/gpu.py" in err and "\n" not in err


def test_peak_flops_by_name(gpu, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    assert gpu.peak_flops(torch.device("cuda"), None) == pytest.approx(989.4e12)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 PCIe")
    assert gpu.peak_flops(torch.device("cuda"), None) == pytest.approx(756e12)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "Some GPU")
    assert gpu.peak_flops(torch.device("cuda"), None) is None
    assert gpu.peak_flops(torch.device("cuda"), 100.0) == pytest.approx(1e14)


def test_the_passes_part_runs_on_the_cpu_with_tiny_models(gpu, tmp_path, capsys):
    """`--parts passes` end to end on the CPU (a GPU run uses ViT-B/16): every row measured, cache rows with
    their target, one encoder and N."""
    from plstitch_eval.hub import load_encoder

    passes = gpu.sibling("gpu_passes")
    args = gpu.parse_args(["--parts", "passes", "--videos", "2", "--seconds", "2", "--batch-size", "4",
                           "--repeats", "1", "--pass-models", "2", "--fps", "2"])  # fmt: skip
    root = gpu.generate_videos(tmp_path / "cholec80", args.videos, args.seconds, height=48, width=64)
    result = passes.passes_rows(
        root, lambda: load_encoder("plstitch-tiny-synthetic"), gpu.forward_floor, args, torch.device("cpu")
    )
    runs = [row["run"] for row in result["rows"]]
    assert runs == ["video, PyAV CPU workers, 2 models", "cache, 1 model", "cache, 2 models"]
    assert all(row["frames_per_model"] == 8 and row["of_forward_floor"] > 0 for row in result["rows"])
    assert [row["target"] for row in result["rows"]] == [None, 0.8, 0.8]
    passes.print_passes(result, args)
    assert "cache, 2 models" in capsys.readouterr().out
