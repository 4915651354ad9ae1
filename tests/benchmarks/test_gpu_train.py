"""`benchmarks/gpu_train.py` on the CPU: the before/after variants agree, and the profile names the phases."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from plstitch_train.data import FrameStore, build_training_data, discover_videos
from tests.train.conftest import tiny_config

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_train.py"


@pytest.fixture(scope="module")
def bench_module():
    spec = importlib.util.spec_from_file_location("_benchmarks_gpu_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def bench(bench_module, video_dir: Path, frame_cache: Path):
    config = tiny_config(video_dir, frame_cache, precision="fp32")
    videos = discover_videos(config.data, config.fps)
    store = FrameStore.build(videos, config.fps, config.frame_size, Path(config.cache_dir), config.clip_len)
    dataset, sampler = build_training_data(config, store, (4, 4))
    batches = [batch for _, batch in zip(range(2), DataLoader(dataset, batch_sampler=sampler), strict=False)]
    return bench_module.Bench.build(config, batches, torch.device("cpu"), "fp32")


def test_after_computes_the_losses_of_before_on_the_cpu(bench_module, bench) -> None:
    before = bench_module.run_variant(bench, "before", steps=4, warmup=1)
    after = bench_module.run_variant(bench, "after", steps=4, warmup=1)
    assert len(before["losses"]) == len(after["losses"]) == 4
    assert {"vid", "mim", "jigsaw", "loss"} <= set(before["losses"][0])
    assert before["losses"][0]["loss"] != before["losses"][-1]["loss"]  # the steps did update the weights
    agreement = bench_module.loss_agreement(before["losses"], after["losses"])
    assert max(agreement.values()) < 1e-5, agreement
    assert before["s_per_step"] > 0 and before["peak_memory_gib"] is None


def test_loss_agreement_is_the_largest_relative_difference(bench_module) -> None:
    ref = [{"loss": 2.0}, {"loss": 4.0}]
    assert bench_module.loss_agreement(ref, [{"loss": 2.2}, {"loss": 4.0}]) == {"loss": pytest.approx(0.1)}


def test_profile_names_the_step_phases(bench_module, bench) -> None:
    summary, table = bench_module.profile_step(bench, "after", steps=1, warmup=1)
    phases = summary["phases_ms_per_step"]
    for phase in ("forward-vid", "forward-mim", "forward-jigsaw", "backward", "clip", "optimizer", "ema"):
        assert phases[phase]["cpu_ms"] > 0, phase
    assert summary["wall_ms_per_step"] > 0 and summary["gpu_busy_fraction"] is None
    assert "aten::" in table


def test_kernel_classes(bench_module) -> None:
    assert bench_module.kernel_class("flash_fwd_kernel<...>") == "attention"
    assert bench_module.kernel_class("sm90_xmma_gemm_bf16bf16_bf16f32") == "GEMM"
    assert bench_module.kernel_class("void at::native::vectorized_layer_norm_kernel") == "normalisation"
    assert bench_module.kernel_class("multi_tensor_apply_kernel<FusedAdamMathFunctor>") == "optimizer"
    assert bench_module.kernel_class("something_new") == "other"
