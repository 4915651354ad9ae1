"""`extract --frames`: frames read from a `write-lmdb --eval-frames` cache instead of the videos - the same
frames (times and labels exactly), features within the JPEG bound stated here, stores that never mix with
stores made from video, and a cache that misses a video refused in one line before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError, DataError, FeatureStoreError
from plstitch_eval.extract import ExtractOptions, ExtractTarget, extract_features, extract_many
from plstitch_eval.features import FeatureStore
from plstitch_eval.hub import load_encoder
from tests.eval.extract.test_clip_extract import clip_models  # noqa: F401 - the fixture, used by name

runner = CliRunner()
# JPEG at quality 90 moves pixels by ~2-3 grey levels on average (docs/frame-cache.md); the bounds between a
# store from the cache and one from the video, measured on these videos: per-frame cosine >= 0.9988 (tiny ViT)
# and 0.99996 (raw pixels, largest feature difference 0.016):
MIN_COSINE = 0.99  # per frame, every model
MAX_PIXEL_FEATURE_DIFF = 0.05  # raw pixels: 8x8 block means, normalised (one grey level = 0.017)


@pytest.fixture(scope="module")
def cache(cholec_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Cholec80-layout test dataset's frames at its evaluation fps (1 fps), decoded size, quality 90."""
    out = tmp_path_factory.mktemp("cache") / "c80.lmdb"
    args = [
        "write-lmdb",
        "--dataset",
        "cholec80",
        "--root",
        str(cholec_root),
        "--eval-frames",
        "--out",
        str(out),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


def _options(**kwargs) -> ExtractOptions:
    return ExtractOptions(**{"batch_size": 2, "num_workers": 0, "device": "cpu", "progress": False, **kwargs})


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def test_cache_features_are_the_video_features_within_the_jpeg_bound(
    cholec_root, tiny_model_dir, cache, tmp_path
):
    encoders = {"vit": load_encoder(str(tiny_model_dir)), "pixels": load_encoder("raw-pixels")}
    targets = [ExtractTarget(enc, tmp_path / "cache" / name, name) for name, enc in encoders.items()]
    summary = extract_many("cholec80", targets, _options(frames=cache), root=cholec_root)
    assert summary.ok and summary.frames == 2 * (3 + 2 + 4)  # 1 fps of the 3 s, 2 s and 4 s videos
    for name, encoder in encoders.items():
        video = FeatureStore(extract_features("cholec80", encoder, tmp_path / "video" / name, _options(),
                                              root=cholec_root).store)  # fmt: skip
        cached = FeatureStore(tmp_path / "cache" / name)
        assert cached.videos() == video.videos()
        for v in video.videos():
            a, b = video.read(v), cached.read(v)
            np.testing.assert_array_equal(a.frame_times, b.frame_times)
            np.testing.assert_array_equal(a.labels, b.labels)
            assert _cosines(a.features, b.features).min() >= MIN_COSINE
            if name == "pixels":
                assert np.abs(a.features - b.features).max() <= MAX_PIXEL_FEATURE_DIFF
            assert not np.array_equal(a.features, b.features)  # JPEG did change the pixels
        frames = cached.manifest["preprocessing"]
        assert frames["frames"] == "jpeg-lmdb" and frames["jpeg_quality"] == 90
        assert "frames" not in video.manifest["preprocessing"]


def test_video_and_cache_stores_never_mix(cholec_root, tiny_model_dir, cache, tmp_path):
    out = tmp_path / "store"
    extract_features("cholec80", str(tiny_model_dir), out, _options(videos=["video01"]), root=cholec_root)
    with pytest.raises(FeatureStoreError, match="preprocessing.frames"):
        extract_features("cholec80", str(tiny_model_dir), out, _options(frames=cache), root=cholec_root)


def test_a_cache_missing_a_video_is_refused_in_one_line_before_the_model_loads(cholec_root, cache, tmp_path):
    bigger = tmp_path / "c80"
    for sub in ("videos", "phase_annotations"):
        (bigger / sub).mkdir(parents=True)
        for f in (cholec_root / sub).iterdir():
            (bigger / sub / f.name).symlink_to(f)
    (bigger / "videos" / "video04.mp4").symlink_to(cholec_root / "videos" / "video01.mp4")
    (bigger / "phase_annotations" / "video04-phase.txt").symlink_to(
        cholec_root / "phase_annotations" / "video01-phase.txt"
    )
    missing = tmp_path / "no-such-model"
    args = ["extract", "--dataset", "cholec80", "--root", str(bigger), "--model", str(missing),
            "--frames", str(cache), "--out", str(tmp_path / "s")]  # fmt: skip
    result = runner.invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert "video04" in lines[0] and "write-lmdb" in lines[0] and "no-such-model" not in lines[0]
    with pytest.raises(DataError, match="fps"):
        extract_features(
            "cholec80", "raw-pixels", tmp_path / "t", _options(frames=cache, fps=2.0), root=cholec_root
        )


@pytest.mark.usefixtures("clip_models")
def test_what_a_cache_cannot_serve_is_refused(cholec_root, cache, tmp_path):
    with pytest.raises(ConfigError, match="clip encoder"):
        extract_features(
            "cholec80", "tiny-clip-videomae", tmp_path / "s", _options(frames=cache), root=cholec_root
        )
    for flag in ("crop_black_margin", "resize_on_decode"):
        with pytest.raises(ConfigError, match="not on a frame cache"):
            _options(frames=cache, **{flag: True})


def test_the_cli_reads_a_cache_and_records_it(cholec_root, tiny_model_dir, cache, tmp_path):
    out = tmp_path / "s"
    args = ["extract", "--dataset", "cholec80", "--root", str(cholec_root), "--model", str(tiny_model_dir),
            "--frames", str(cache), "--out", str(out), "--device", "cpu", "--json", "-"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["frames"] == 9
    assert FeatureStore(out).manifest["preprocessing"]["frames"] == "jpeg-lmdb"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="nvJPEG decoding of a cache needs a CUDA device")
def test_cache_on_cuda_is_the_cpu_cache_within_nvjpeg_tolerance(cholec_root, tiny_model_dir, cache, tmp_path):
    encoder = load_encoder(str(tiny_model_dir))
    cpu = extract_features("cholec80", encoder, tmp_path / "cpu", _options(frames=cache), root=cholec_root)
    gpu = extract_features(
        "cholec80", encoder, tmp_path / "gpu", _options(frames=cache, device="cuda", precision="fp32"),
        root=cholec_root,
    )  # fmt: skip
    for v in FeatureStore(cpu.store).videos():
        a, b = FeatureStore(cpu.store).read(v), FeatureStore(gpu.store).read(v)
        np.testing.assert_array_equal(a.frame_times, b.frame_times)
        assert _cosines(a.features, b.features).min() >= MIN_COSINE
