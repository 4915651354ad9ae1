"""Extraction with either decoder: the same features from PyAV and TorchCodec on the same MP4s, the store
records the decoder (older stores without the record read as PyAV's) and refuses to mix decoders, and the
CLI's `--decoder` end to end, with its one-line error when TorchCodec is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data import torchcodec_decode
from plstitch_eval.data.decoders import Decoding, recorded_decoder
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract import (
    ExtractOptions,
    VideoJob,
    extract_features,
    iter_device_chunks,
    iter_video_chunks,
    make_loader,
)
from plstitch_eval.hub import load_encoder
from plstitch_eval.preprocess import DataConfig, frame_plan
from plstitch_eval.store.features import MANIFEST, FeatureStore

pytestmark = pytest.mark.usefixtures("fresh_torchcodec_detection")  # some tests hide TorchCodec

FPS = 5.0
runner = CliRunner()


def _run(root, model, out, **kwargs):
    options = {"fps": FPS, "batch_size": 4, "num_workers": 0, "device": "cpu", "progress": False, **kwargs}
    return extract_features("cholec80", str(model), out, ExtractOptions(**options), root=root)


def _manifest(store) -> dict:
    return json.loads((store / MANIFEST).read_text())


@pytest.mark.parametrize("resize_on_decode", [False, True])
def test_torchcodec_features_equal_pyav_features(torchcodec_ready, cholec_root, tiny_model_dir, tmp_path,
                                                 resize_on_decode):  # fmt: skip
    pyav = _run(cholec_root, tiny_model_dir, tmp_path / "pyav", resize_on_decode=resize_on_decode)
    ours = _run(cholec_root, tiny_model_dir, tmp_path / "tc", decoder="torchcodec", num_workers=1,
                resize_on_decode=resize_on_decode)  # fmt: skip
    assert pyav.ok and ours.ok and [r.frames for r in ours.results] == [r.frames for r in pyav.results]
    a, b = FeatureStore(tmp_path / "pyav"), FeatureStore(tmp_path / "tc")
    for name in a.videos():
        x, y = a.read(name), b.read(name)
        np.testing.assert_array_equal(y.frame_times, x.frame_times)
        np.testing.assert_array_equal(y.labels, x.labels)
        if resize_on_decode:  # decoders resize differently (a few grey levels on these noisy frames)
            cosine = (x.features * y.features).sum(1) / np.linalg.norm(x.features, axis=1)
            assert (cosine / np.linalg.norm(y.features, axis=1)).min() > 0.98
        else:  # identical full-size pixels: identical features
            np.testing.assert_array_equal(y.features, x.features)
    assert recorded_decoder(_manifest(tmp_path / "pyav")["preprocessing"]) == "pyav"
    assert "decoder" not in _manifest(tmp_path / "pyav")["preprocessing"]  # PyAV stores read as before
    assert _manifest(tmp_path / "tc")["preprocessing"]["decoder"] == "torchcodec"


def test_a_store_refuses_another_decoder(torchcodec_ready, cholec_root, tiny_model_dir, tmp_path):
    store = tmp_path / "store"
    _run(cholec_root, tiny_model_dir, store, videos=["video01"])
    with pytest.raises(
        FeatureStoreError, match=r"made differently \(preprocessing\.decoder: \(none\) -> torchcodec"
    ):
        _run(cholec_root, tiny_model_dir, store, decoder="torchcodec")
    again = _run(cholec_root, tiny_model_dir, store, decoder="pyav")  # a store without the record is PyAV's
    assert [r.status for r in again.results] == ["skipped", "done", "done"]
    replaced = _run(cholec_root, tiny_model_dir, store, decoder="torchcodec", overwrite=True)
    assert [r.status for r in replaced.results] == ["done"] * 3
    assert _manifest(store)["preprocessing"]["decoder"] == "torchcodec"


def _cli(root, model, out, *more):
    args = ["extract", "--dataset", "cholec80", "--root", str(root), "--model", str(model), "--out", str(out)]
    return runner.invoke(app, [*args, "--device", "cpu", "--fps", "2", "-j", "0", *more])


def test_cli_extract_with_torchcodec(torchcodec_ready, cholec_root, tiny_model_dir, tmp_path):
    result = _cli(cholec_root, tiny_model_dir, tmp_path / "s", "--decoder", "torchcodec", "--json", "-")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["ok"] and summary["frames"] == 2 * (3 + 2 + 4)
    assert _manifest(tmp_path / "s")["preprocessing"]["decoder"] == "torchcodec"


def test_cli_without_torchcodec(monkeypatch, cholec_root, tiny_model_dir, tmp_path):
    monkeypatch.setitem(sys.modules, "torchcodec", None)
    torchcodec_decode.unavailable_reason.cache_clear()
    result = _cli(cholec_root, tiny_model_dir, tmp_path / "s", "--decoder", "torchcodec")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith("error: --decoder torchcodec: TorchCodec is not installed")
    assert 'pip install "plstitch[torchcodec]"' in lines[0] and "apt-get install ffmpeg" in lines[0]
    assert not (tmp_path / "s").exists()
    auto = _cli(cholec_root, tiny_model_dir, tmp_path / "a", "--decoder", "auto", "--videos", "video02")
    assert auto.exit_code == 0, auto.output
    assert "decoder: auto chose pyav on cpu (TorchCodec is not installed" in auto.stderr
    assert "decoder" not in _manifest(tmp_path / "a")["preprocessing"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_cli_refuses_pyav_on_cuda_without_cuda(cholec_root, tiny_model_dir, tmp_path):
    result = _cli(cholec_root, tiny_model_dir, tmp_path / "s", "--decode-device", "cuda")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "--decode-device cuda: CUDA is not available here; use --decode-device cpu." in result.stderr


def test_batched_device_path_gives_the_per_frame_crops(torchcodec_ready, cholec_root, tiny_model_dir):
    """`iter_device_chunks` (the NVDEC path: decode, resize and crop a batch where it was decoded) run on the
    CPU gives the crops and times of the per-frame path, chunk by chunk."""
    plan = frame_plan(load_encoder(str(tiny_model_dir)).data_config, FPS)
    job = VideoJob(0, Path(cholec_root) / "videos" / "video03.mp4")
    ours = list(iter_device_chunks(job, plan, 4, Decoding("torchcodec", "cpu")))
    pyav = list(iter_video_chunks(job, plan, 4))
    assert [len(c.images) for c in ours] == [len(c.images) for c in pyav] == [4, 4, 4, 4, 4, 0]
    assert [c.last for c in ours] == [c.last for c in pyav] and all(c.error is None for c in ours)
    for a, b in zip(ours, pyav, strict=True):
        assert a.images.dtype == b.images.dtype and a.images.shape == b.images.shape
        assert torch.equal(a.images, b.images)  # CPU uint8 resize: the same per frame or per batch
        assert a.frame_times.tolist() == b.frame_times.tolist()


def test_decoding_on_cuda_runs_in_the_main_process(cholec_root):
    jobs = [VideoJob(0, Path(cholec_root) / "videos" / "video01.mp4")]
    plan = frame_plan(DataConfig.for_size(32), FPS)
    cuda = make_loader(jobs, plan, 4, 4, torch.device("cuda"), decoding=Decoding("torchcodec", "cuda"))
    assert cuda.num_workers == 0 and not cuda.pin_memory  # frames arrive on the GPU: no fork, no pinning
    cpu = make_loader(jobs, plan, 4, 4, torch.device("cuda"), decoding=Decoding("torchcodec", "cpu"))
    assert cpu.num_workers == 1 and cpu.pin_memory


@pytest.mark.parametrize("command", ["extract", "benchmark", "predict", "train"])
def test_every_decoding_command_takes_the_decoder_options(command):
    result = runner.invoke(app, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0 and "--decoder" in result.stdout
    assert ("--decode-device" in result.stdout) == (command != "train")  # training decodes on the CPU


def test_benchmark_without_torchcodec_is_one_line(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torchcodec", None)
    torchcodec_decode.unavailable_reason.cache_clear()
    args = ["benchmark", "--models", "raw-pixels", "--datasets", "synthetic", "--out", str(tmp_path / "b")]
    result = runner.invoke(app, [*args, "--decoder", "torchcodec"])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert 'pip install "plstitch[torchcodec]"' in lines[0] and not (tmp_path / "b").exists()
