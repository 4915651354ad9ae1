"""`extract --frames`: frames read from a `write-lmdb --eval-frames` cache instead of the videos - the same
frames (times and labels exactly), features equal to the video's byte for byte from a lossless (PNG, the
default) cache and within the JPEG bound stated here from a JPEG one, stores that never mix with stores made
from video, and a cache that misses a video refused in one line before any model loads."""

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
from plstitch_eval.extract.pipeline import cache_decoding
from plstitch_eval.hub import load_encoder
from plstitch_eval.store.features import FeatureStore
from tests.eval.extract.test_clip_extract import clip_models  # noqa: F401 - the fixture, used by name

runner = CliRunner()
# JPEG at quality 90 moves pixels by ~2-3 grey levels on average (docs/frame-cache.md); the bounds between a
# store from the cache and one from the video, measured on these videos: per-frame cosine >= 0.9988 (tiny ViT)
# and 0.99996 (raw pixels, largest feature difference 0.016):
MIN_COSINE = 0.99  # per frame, every model
MAX_PIXEL_FEATURE_DIFF = 0.05  # raw pixels: 8x8 block means, normalised (one grey level = 0.017)


def _write_cache(root: Path, out: Path, *flags: str) -> Path:
    args = [
        "write-lmdb",
        "--dataset",
        "cholec80",
        "--root",
        str(root),
        "--eval-frames",
        *flags,
        "--out",
        str(out),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def cache(cholec_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Cholec80-layout test dataset's frames at its evaluation fps (1 fps), decoded size, JPEG at 90."""
    return _write_cache(cholec_root, tmp_path_factory.mktemp("cache") / "c80.lmdb", "--image-format", "jpeg")


@pytest.fixture(scope="module")
def png_cache(cholec_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same frames as `write-lmdb --eval-frames` writes them by default: lossless PNG."""
    return _write_cache(cholec_root, tmp_path_factory.mktemp("cache") / "c80-png.lmdb")


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


def test_a_lossless_cache_gives_the_video_features_byte_for_byte(
    cholec_root, tiny_model_dir, png_cache, tmp_path
):
    encoders = {"vit": load_encoder(str(tiny_model_dir)), "pixels": load_encoder("raw-pixels")}
    for workers in (0, 2):  # decoded in the main process, and in decoding workers
        options = _options(num_workers=workers)
        targets = [
            ExtractTarget(e, tmp_path / f"cache{workers}" / name, name) for name, e in encoders.items()
        ]
        summary = extract_many("cholec80", targets, _options(frames=png_cache, num_workers=workers),
                               root=cholec_root)  # fmt: skip
        assert summary.ok and summary.frames == 2 * (3 + 2 + 4)
        for name, encoder in encoders.items():
            video = FeatureStore(extract_features("cholec80", encoder, tmp_path / f"video{workers}" / name,
                                                  options, root=cholec_root).store)  # fmt: skip
            cached = FeatureStore(tmp_path / f"cache{workers}" / name)
            assert cached.videos() == video.videos()
            for v in video.videos():
                a, b = video.read(v), cached.read(v)
                np.testing.assert_array_equal(a.frame_times, b.frame_times)
                np.testing.assert_array_equal(a.labels, b.labels)
                assert a.features.dtype == b.features.dtype and a.features.shape == b.features.shape
                assert a.features.tobytes() == b.features.tobytes(), (name, v)  # identical bytes
            frames = cached.manifest["preprocessing"]
            assert frames["frames"] == "png-lmdb" and "jpeg_quality" not in frames
            assert "frames" not in video.manifest["preprocessing"]


def test_a_lossless_cache_is_decoded_on_the_cpu_under_a_cuda_model(png_cache, cache):
    """nvJPEG cannot read PNG: a PNG cache's frames are decoded (and resized) by the CPU workers, as video
    decoded on the CPU is; a JPEG cache's go to nvJPEG on the model's device."""
    from plstitch_eval.data.frames_lmdb import FrameCache

    cuda = torch.device("cuda")
    assert cache_decoding(_options(), cuda, FrameCache.open(png_cache)).device == "cpu"
    assert cache_decoding(_options(), cuda, FrameCache.open(cache)).device == "cuda"


def test_stores_from_jpeg_and_png_caches_never_mix(cholec_root, png_cache, cache, tmp_path):
    out = tmp_path / "store"
    extract_features(
        "cholec80", "raw-pixels", out, _options(videos=["video01"], frames=cache), root=cholec_root
    )
    with pytest.raises(FeatureStoreError, match="preprocessing.frames"):
        extract_features("cholec80", "raw-pixels", out, _options(frames=png_cache), root=cholec_root)


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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a CUDA model needs a CUDA device")
def test_a_lossless_cache_under_a_cuda_model_is_video_decoded_on_the_cpu_byte_for_byte(
    cholec_root, tiny_model_dir, png_cache, tmp_path
):
    encoder = load_encoder(str(tiny_model_dir))
    on_cuda = {"device": "cuda", "precision": "fp32"}
    video = extract_features(
        "cholec80", encoder, tmp_path / "video", _options(decode_device="cpu", **on_cuda), root=cholec_root
    )
    cached = extract_features(
        "cholec80", encoder, tmp_path / "cache", _options(frames=png_cache, **on_cuda), root=cholec_root
    )
    for v in FeatureStore(video.store).videos():
        a, b = FeatureStore(video.store).read(v), FeatureStore(cached.store).read(v)
        np.testing.assert_array_equal(a.frame_times, b.frame_times)
        assert a.features.dtype == b.features.dtype and a.features.tobytes() == b.features.tobytes(), v
