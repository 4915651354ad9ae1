"""Extraction with clip encoders: one feature per sampled frame, each equal to the model run on that frame's
window built by hand from every decoded frame (the rule of `read_clips`, written in `test_read_clips`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.video import ClipSampling, probe, read_frames
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.hub import DataConfig, Encoder, ModelEntry, load_encoder
from plstitch_eval.hub.registry import MODELS, register
from plstitch_eval.store.features import FeatureStore
from tests.eval.data.test_read_clips import reference_windows
from tests.eval.hub.test_clip_models import DIM, SIZE, timesformer_state, videomae_state

from .conftest import NATIVE_FPS, VIDEO_SECONDS

FPS = 5.0
CONFIG = DataConfig(input_size=(3, SIZE, SIZE), resize_size=SIZE, crop_pct=1.0, interpolation="bilinear")
WINDOWS = {
    "tiny-clip-videomae": ("videomae", ClipSampling(4, frame_stride=2)),  # 2 native frames apart, anchor 2
    "tiny-clip-timesformer": ("timesformer", ClipSampling(4, stride_seconds=0.45, anchor=1)),  # crosses ends
}


@pytest.fixture(scope="module")
def clip_models(tmp_path_factory: pytest.TempPathFactory):
    """Registry entries of a tiny VideoMAE V2 and a tiny TimeSformer; checkpoints in upstream layouts."""
    folder = tmp_path_factory.mktemp("clip_models")
    torch.save({"model": videomae_state()}, folder / "videomae.pth")
    torch.save({"teacher": {f"backbone.{k}": v for k, v in timesformer_state().items()}}, folder / "tsf.pth")
    files = {"videomae": folder / "videomae.pth", "timesformer": folder / "tsf.pth"}
    for name, (converter, clip) in WINDOWS.items():
        register(
            ModelEntry(
                name,
                converter,
                DIM,
                converter,
                data_config=CONFIG,
                clip=clip,
                local_path=str(files[converter]),
                license="test",
                citation="test",
            )
        )
    yield
    for name in WINDOWS:
        MODELS.pop(name, None)


def _extract(root: Path, model: str | Encoder, out: Path, **kwargs):
    options = {"fps": FPS, "batch_size": 4, "num_workers": 0, "device": "cpu", "progress": False, **kwargs}
    return extract_features("cholec80", model, out, ExtractOptions(**options), root=root)


def _expected_features(encoder: Encoder, source: Path) -> tuple[np.ndarray, list[list[int]]]:
    """The encoder on windows built by hand: every frame decoded, the rule applied, the eval transform."""
    frames = list(read_frames(source))
    step = encoder.clip.step(probe(source).fps)
    windows = reference_windows([f.time for f in frames], FPS, encoder.clip, step)
    x = torch.stack([torch.stack([encoder.transform(frames[i].image) for i in window]) for window in windows])
    with torch.inference_mode():
        return encoder(x).numpy(), windows


@pytest.mark.parametrize("name", list(WINDOWS))
def test_clip_features_equal_the_model_on_hand_built_windows(cholec_root, clip_models, tmp_path, name):
    summary = _extract(cholec_root, name, tmp_path / "store", num_workers=1)
    assert summary.ok and [r.frames for r in summary.results] == [int(s * FPS) for s in VIDEO_SECONDS]
    encoder = load_encoder(name)
    store = FeatureStore(tmp_path / "store")
    for record in get_dataset("cholec80", root=cholec_root).videos():
        item = store.read(record.name)
        expected, windows = _expected_features(encoder, record.source)
        np.testing.assert_allclose(item.features, expected, rtol=1e-5, atol=1e-5)
        # one feature per sampled frame, at the sampled frames' times, labelled as the image path labels them
        sampled = list(read_frames(record.source, fps=FPS))
        np.testing.assert_allclose(item.frame_times, [f.time for f in sampled], atol=1e-9)
        native_index = np.round(item.frame_times * NATIVE_FPS).astype(int)
        np.testing.assert_array_equal(item.labels, native_index // NATIVE_FPS)
        assert len({tuple(w) for w in windows}) == len(windows)  # windows differ: the check can fail
    if name == "tiny-clip-timesformer":  # windows past both ends repeat the first / last frame
        assert windows[0] == [0, 0, 12, 23] and windows[-1][-2:] == [99, 99]
    manifest = store.manifest
    assert manifest["preprocessing"]["clip"] == WINDOWS[name][1].to_dict()
    assert manifest["model"]["provenance"]["clip"] == WINDOWS[name][1].to_dict()


def test_a_store_never_mixes_windows(cholec_root, clip_models, tmp_path):
    encoder = load_encoder("tiny-clip-videomae")
    assert _extract(cholec_root, encoder, tmp_path / "store", videos=["video01"]).ok
    other = Encoder(encoder.model, encoder.data_config, encoder.provenance, ClipSampling(4, frame_stride=3))
    with pytest.raises(FeatureStoreError, match="made differently"):
        _extract(cholec_root, other, tmp_path / "store", videos=["video01"])
    resized = _extract(cholec_root, encoder, tmp_path / "decode", videos=["video01"], resize_on_decode=True)
    assert resized.ok and FeatureStore(tmp_path / "decode").read("video01").features.shape == (15, DIM)


def test_a_corrupt_video_fails_alone(cholec_root, clip_models, tmp_path):
    root = tmp_path / "c80"
    shutil.copytree(cholec_root, root)
    video = root / "videos" / "video02.mp4"
    video.write_bytes(video.read_bytes()[: video.stat().st_size // 3])
    summary = _extract(root, "tiny-clip-timesformer", tmp_path / "store", videos=["video01", "video02"])
    assert {r.video: r.status for r in summary.results} == {"video01": "done", "video02": "failed"}
    assert "video02.mp4" in summary.failed[0].error
