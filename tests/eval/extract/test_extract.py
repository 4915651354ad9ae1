"""End-to-end extraction on real MP4s with a real tiny ViT: correctness, resume, refusal, bad input."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.video import read_frames
from plstitch_eval.errors import ConfigError, DecodeError, FeatureStoreError
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.hub import load_encoder
from plstitch_eval.preprocess import frame_plan, prepare_frame
from plstitch_eval.store.features import FeatureStore

from .conftest import NATIVE_FPS, VIDEO_SECONDS, write_phase_tsv

FPS = 5.0


def _run(root: Path, model: Path | str, out: Path, on_video_done=None, **kwargs):
    options = {"fps": FPS, "batch_size": 4, "num_workers": 0, "device": "cpu", "progress": False}
    return extract_features(
        "cholec80",
        str(model),
        out,
        ExtractOptions(**{**options, **kwargs}),
        root=root,
        on_video_done=on_video_done,
    )


def _file_bytes(store: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(store.glob("*.safetensors"))}


def test_features_equal_direct_forward(cholec_root, tiny_model_dir, tmp_path):
    summary = _run(cholec_root, tiny_model_dir, tmp_path / "store", num_workers=2)
    assert summary.ok and [r.status for r in summary.results] == ["done"] * 3
    encoder = load_encoder(str(tiny_model_dir))
    store = FeatureStore(tmp_path / "store")
    for record in get_dataset("cholec80", root=cholec_root).videos():
        item = store.read(record.name)
        frames = list(read_frames(record.source, fps=FPS))
        # reference: the encoder's own PIL-free transform on each decoded frame, one forward for all frames
        x = torch.stack([encoder.transform(f.image) for f in frames])
        with torch.inference_mode():
            expected = encoder(x).numpy()
        np.testing.assert_allclose(item.features, expected, rtol=1e-5, atol=1e-5)
        assert item.features.dtype == np.float32 and item.features.shape == (len(frames), 32)
        np.testing.assert_allclose(item.frame_times, np.arange(len(frames)) / FPS, atol=1e-9)
        # label of the 25 fps annotation row of each sampled frame: phase = whole seconds elapsed
        native_index = np.round(item.frame_times * NATIVE_FPS).astype(int)
        np.testing.assert_array_equal(item.labels, native_index // NATIVE_FPS)
    assert [r.frames for r in summary.results] == [int(s * FPS) for s in VIDEO_SECONDS]


def test_worker_crop_matches_encoder_transform(tiny_model_dir):
    encoder = load_encoder(str(tiny_model_dir))
    plan = frame_plan(encoder.data_config, None)
    image = np.random.default_rng(0).integers(0, 256, size=(45, 70, 3), dtype=np.uint8)
    crop = prepare_frame(image, plan)
    assert crop.dtype == torch.uint8 and tuple(crop.shape) == (3, 32, 32)
    expected = encoder.transform(image)
    mean = torch.tensor(plan.mean).view(3, 1, 1)
    std = torch.tensor(plan.std).view(3, 1, 1)
    torch.testing.assert_close((crop.float() / 255 - mean) / std, expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("field", "value"),
    [("batch_size", 0), ("fps", 0.0), ("num_workers", -1), ("precision", "fp8"), ("videos", "video01")],
)
def test_options_are_checked_when_made(field, value):
    with pytest.raises(ConfigError, match=field) as info:
        ExtractOptions(**{field: value})
    assert "\n" not in str(info.value)


def test_options_turn_a_torch_device_into_its_name():
    assert ExtractOptions(device=torch.device("cpu")).device == "cpu"


def test_manifest_records_run(cholec_root, tiny_model_dir, tmp_path):
    _run(cholec_root, tiny_model_dir, tmp_path / "store", videos=["video02"])
    store = FeatureStore(tmp_path / "store")
    manifest = store.manifest
    assert store.videos() == ["video02"]
    assert manifest["dataset"] == "cholec80" and manifest["fps"] == FPS
    assert manifest["feature_dim"] == 32 and manifest["model"]["feature_dim"] == 32
    assert len(manifest["model"]["provenance"]["sha256"]) == 64
    assert manifest["preprocessing"]["input_size"] == [3, 32, 32]
    assert manifest["class_names"][0] == "Preparation"
    assert set(manifest["split_schemes"]) == {"40-40", "32-8-40", "40-8-32"}
    assert manifest["splits"]["train"] == ["video01", "video02", "video03"]


class _Interrupt(Exception):
    pass


def test_interrupted_run_resumes_byte_identical(cholec_root, tiny_model_dir, tmp_path):
    _run(cholec_root, tiny_model_dir, tmp_path / "full")

    def stop_after_first(result):
        raise _Interrupt(result.video)

    with pytest.raises(_Interrupt):
        _run(cholec_root, tiny_model_dir, tmp_path / "resumed", num_workers=2, on_video_done=stop_after_first)
    partial = FeatureStore(tmp_path / "resumed")
    assert len(partial.videos()) == 1 and (tmp_path / "resumed" / "manifest.json").exists()
    assert not list((tmp_path / "resumed").glob(".*.tmp"))  # the interrupted run left no temp file
    created = partial.manifest["created"]

    # a kill during a write leaves only a hidden temp file, which is neither a video nor in the way
    (tmp_path / "resumed" / ".video02.safetensors.abc123.tmp").write_bytes(b"half a file")
    summary = _run(cholec_root, tiny_model_dir, tmp_path / "resumed", num_workers=2)
    assert sorted(r.status for r in summary.results) == ["done", "done", "skipped"]
    assert _file_bytes(tmp_path / "resumed") == _file_bytes(tmp_path / "full")
    assert partial.manifest["created"] == created


def test_refuses_to_mix_stores(cholec_root, tiny_model_dir, tmp_path):
    out = tmp_path / "store"
    _run(cholec_root, tiny_model_dir, out, videos=["video02"])
    with pytest.raises(FeatureStoreError, match="fps"):
        _run(cholec_root, tiny_model_dir, out, fps=2.0, videos=["video02"])
    with pytest.raises(FeatureStoreError, match="preprocessing"):
        _run(cholec_root, tiny_model_dir, out, videos=["video02"], resize_on_decode=True)
    other_model = shutil.copytree(tiny_model_dir, tmp_path / "other_model")
    with pytest.raises(FeatureStoreError, match="model_spec"):
        _run(cholec_root, other_model, out, videos=["video02"])
    with pytest.raises(FeatureStoreError, match="precision"):
        _run(cholec_root, tiny_model_dir, out, videos=["video02"], precision="bf16")
    assert FeatureStore(out).manifest["fps"] == FPS  # untouched by the refused runs
    summary = _run(cholec_root, tiny_model_dir, out, fps=2.0, videos=["video02"], overwrite=True)
    assert summary.results[0].status == "done" and summary.results[0].frames == 4
    assert FeatureStore(out).manifest["fps"] == 2.0


def test_refuses_a_folder_that_is_not_a_store(cholec_root, tiny_model_dir, tmp_path):
    (tmp_path / "mine.txt").write_text("precious")
    with pytest.raises(FeatureStoreError, match="not a feature store"):
        _run(cholec_root, tiny_model_dir, tmp_path, overwrite=True)
    assert (tmp_path / "mine.txt").read_text() == "precious"


@pytest.fixture
def corrupt_root(cholec_root, tmp_path):
    """The tiny dataset with video02 truncated to a third of its bytes."""
    root = tmp_path / "c80"
    shutil.copytree(cholec_root, root)
    video = root / "videos" / "video02.mp4"
    video.write_bytes(video.read_bytes()[: video.stat().st_size // 3])
    return root


def test_corrupt_video_fails_alone(corrupt_root, tiny_model_dir, tmp_path):
    summary = _run(corrupt_root, tiny_model_dir, tmp_path / "store", num_workers=2)
    assert not summary.ok
    assert {r.video: r.status for r in summary.results} == {
        "video01": "done",
        "video02": "failed",
        "video03": "done",
    }
    assert "video02.mp4" in summary.failed[0].error
    assert FeatureStore(tmp_path / "store").videos() == ["video01", "video03"]


def test_corrupt_video_fail_fast(corrupt_root, tiny_model_dir, tmp_path):
    with pytest.raises(DecodeError, match="video02.mp4"):
        _run(corrupt_root, tiny_model_dir, tmp_path / "store", fail_fast=True, videos=["video02", "video03"])
    assert not FeatureStore(tmp_path / "store").has("video03")


def test_frames_past_annotations_are_dropped(cholec_root, tiny_model_dir, tmp_path):
    root = tmp_path / "c80"
    shutil.copytree(cholec_root, root)
    write_phase_tsv(root / "phase_annotations" / "video01-phase.txt", 2 * NATIVE_FPS)  # video lasts 3 s
    _run(root, tiny_model_dir, tmp_path / "store", videos=["video01"])
    item = FeatureStore(tmp_path / "store").read("video01")
    assert len(item.features) == len(item.labels) == len(item.frame_times) == 2 * FPS
    assert item.frame_times[-1] < 2.0


def test_decoding_workers_fill_the_cores_on_an_accelerator_and_split_them(monkeypatch):
    """Default workers: one per core where the model runs on a GPU, min(4, cores) on CPU; each worker gets
    cores // workers FFmpeg threads (one with a worker per core), the main process alone FFmpeg's default."""
    import plstitch_eval.extract as extract_module
    from plstitch_eval.extract import loader

    monkeypatch.setattr(loader.os, "sched_getaffinity", lambda pid: set(range(12)), raising=False)
    assert extract_module.available_cores() == 12
    assert extract_module.default_workers(torch.device("cuda")) == 12
    assert extract_module.default_workers(torch.device("cpu")) == 4
    assert [extract_module.decode_threads(w) for w in (0, 1, 5, 12, 16)] == [0, 12, 2, 1, 1]
    monkeypatch.setattr(loader.os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert extract_module.default_workers(torch.device("cuda")) == 1
    assert extract_module.default_workers(torch.device("cpu")) == 1


def test_workers_take_each_video_once_largest_first_and_in_frame_order(tmp_path):
    """Two workers pull five videos of different lengths from the shared counter: every video arrives once,
    its chunks in frame order and complete; the main process alone keeps the given order."""
    from torch.utils.data import DataLoader

    from plstitch_eval.extract import VideoFrameStream, VideoJob, make_loader
    from plstitch_eval.hub import DataConfig
    from plstitch_eval.preprocess import frame_plan
    from tests.eval.data.media import decode_index, write_index_video

    lengths = [30, 130, 55, 80, 10]  # frames at 25 fps, sampled at 5 fps
    jobs = [VideoJob(i, write_index_video(tmp_path / f"v{i}.mp4", n)) for i, n in enumerate(lengths)]
    plan = frame_plan(DataConfig.for_size(32), 5.0)
    stream = VideoFrameStream(jobs, plan, batch_size=4)
    assert [job.index for job in stream.largest_first] == [1, 3, 2, 0, 4]

    def collect(loader: DataLoader) -> tuple[list[int], dict[int, list[int]]]:
        order, seen = [], {}
        for chunk in loader:
            assert chunk.error is None
            frames = seen.setdefault(chunk.video_index, [])
            frames += [round(t * 25) for t in chunk.frame_times.tolist()]
            indices = [decode_index(image.permute(1, 2, 0).numpy()) for image in chunk.images]
            assert indices == frames[len(frames) - len(indices) :]
            if chunk.last:
                order.append(chunk.video_index)
        return order, seen

    order, seen = collect(make_loader(jobs, plan, 4, 2, torch.device("cpu")))
    assert sorted(order) == [0, 1, 2, 3, 4]
    for i, n in enumerate(lengths):
        assert seen[i] == list(range(0, n, 5)), i
    order, _ = collect(make_loader(jobs, plan, 4, 0, torch.device("cpu")))
    assert order == [0, 1, 2, 3, 4]
