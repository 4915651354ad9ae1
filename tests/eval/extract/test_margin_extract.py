"""`plstitch extract --crop-black-margin`: each video's black border is found, recorded and cut before the
model's transform, giving the features of the hand-cropped frames; stores made with and without the crop never
mix; `plstitch predict` cuts a new video's border as extraction did; `plstitch benchmark` passes it on."""

from __future__ import annotations

import dataclasses
import io
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.benchmark import runner as benchmark_runner
from plstitch_eval.cli import app
from plstitch_eval.data.margin import MarginBox, detection_record
from plstitch_eval.data.video import ClipSampling, read_frames
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import VideoJob, iter_clip_chunks, iter_video_chunks
from plstitch_eval.hub import load_encoder
from plstitch_eval.predict import (
    PredictOptions,
    VideoSource,
    load_probe_encoder,
    predict_online,
    predict_videos,
)
from plstitch_eval.preprocess import frame_plan, normalize_crops, prepare_frame
from plstitch_eval.probes import LinearProbeHead, load_probe, save_probe
from plstitch_eval.store.features import FeatureStore
from tests.eval.extract.conftest import NATIVE_FPS, ramp_frames, write_mp4, write_phase_tsv

HEIGHT, WIDTH = 128, 192
PICTURE = (16, 112, 32, 160)  # y0, y1, x0, x1: a 4:3 picture inside a black border
FPS = 2
runner = CliRunner()


def bordered_frames(seed: int) -> Callable[[int], np.ndarray]:
    """`write_mp4` frames: a changing picture (every pixel above the threshold) inside a black border."""
    y0, y1, x0, x1 = PICTURE
    inner = ramp_frames(seed, y1 - y0, x1 - x0)

    def image_at(i: int) -> np.ndarray:
        image = np.zeros((HEIGHT, WIDTH, 3), dtype=np.uint8)
        image[y0:y1, x0:x1] = np.maximum(inner(i), 40)
        return image

    return image_at


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Cholec80 layout: video01 (3 s) has the black border, video02 (2 s) has none."""
    root = tmp_path_factory.mktemp("bordered")
    write_mp4(root / "videos" / "video01.mp4", 3 * NATIVE_FPS, seed=0, image_at=bordered_frames(0))
    write_mp4(root / "videos" / "video02.mp4", 2 * NATIVE_FPS, seed=1)
    for name, seconds in (("video01", 3), ("video02", 2)):
        write_phase_tsv(root / "phase_annotations" / f"{name}-phase.txt", seconds * NATIVE_FPS)
    return root


def _extract(root: Path, model: Path, out: Path, *extra: str):
    args = ["extract", "--dataset", "cholec80", "--root", str(root), "--model", str(model), "--out", str(out)]
    return runner.invoke(app, [*args, "--fps", str(FPS), "--device", "cpu", *extra])


@pytest.fixture(scope="module")
def stores(root: Path, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The two videos extracted with the crop (in a decoding worker) and without it."""
    tmp = tmp_path_factory.mktemp("stores")
    cropped = _extract(root, tiny_model_dir, tmp / "cropped", "--crop-black-margin", "-j", "1")
    assert cropped.exit_code == 0, cropped.output
    plain = _extract(root, tiny_model_dir, tmp / "plain", "-j", "0")
    assert plain.exit_code == 0, plain.output
    return {"cropped": tmp / "cropped", "plain": tmp / "plain"}


def test_the_store_records_the_detection_and_each_videos_box(stores):
    manifest = FeatureStore(stores["cropped"]).manifest
    assert manifest["preprocessing"]["crop_black_margin"] == {
        "threshold": 15, "min_fraction": 0.02, "frames": 32, "fps": 0.5,
    }  # fmt: skip
    assert manifest["preprocessing"]["crop_black_margin"] == detection_record()
    boxes = manifest["black_margins"]
    y0, y1, x0, x1 = PICTURE
    drawn = {"top": y0 / HEIGHT, "bottom": y1 / HEIGHT, "left": x0 / WIDTH, "right": x1 / WIDTH}
    for side, fraction in drawn.items():
        assert abs(boxes["video01"][side] - fraction) <= 2 / (HEIGHT if side in ("top", "bottom") else WIDTH)
    assert MarginBox.from_dict(boxes["video02"]).is_full  # no border: nothing cut, but the box is recorded
    plain = FeatureStore(stores["plain"]).manifest
    assert "crop_black_margin" not in plain["preprocessing"] and "black_margins" not in plain


def test_features_are_the_hand_cropped_frames_features(stores, root, tiny_model_dir):
    encoder = load_encoder(str(tiny_model_dir), device="cpu")
    plan = frame_plan(encoder.data_config, FPS)
    y0, y1, x0, x1 = PICTURE
    frames = read_frames(root / "videos" / "video01.mp4", fps=FPS)
    crops = torch.stack([prepare_frame(frame.image[y0:y1, x0:x1], plan) for frame in frames])
    with torch.inference_mode():
        expected = encoder(normalize_crops(crops, plan)).float().numpy()
    cropped, plain = FeatureStore(stores["cropped"]), FeatureStore(stores["plain"])
    np.testing.assert_allclose(cropped.read("video01").features, expected, rtol=0, atol=1e-5)
    assert not np.allclose(plain.read("video01").features, expected, atol=1e-2)
    np.testing.assert_array_equal(cropped.read("video01").frame_times, plain.read("video01").frame_times)
    # a video without a border gives the same features with the crop as without it
    np.testing.assert_allclose(
        cropped.read("video02").features, plain.read("video02").features, rtol=0, atol=1e-6
    )


def test_stores_with_and_without_the_crop_never_mix(stores, root, tiny_model_dir, tmp_path):
    out = tmp_path / "plain"
    shutil.copytree(stores["plain"], out)
    before = (out / "manifest.json").read_text()
    result = _extract(root, tiny_model_dir, out, "--crop-black-margin", "-j", "0")
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith("error:") and "preprocessing.crop_black_margin: (none) -> " in lines[0]
    assert "--overwrite" in lines[0] and (out / "manifest.json").read_text() == before

    resumed = tmp_path / "cropped"  # resuming with the crop skips the videos and keeps their boxes
    shutil.copytree(stores["cropped"], resumed)
    again = _extract(root, tiny_model_dir, resumed, "--crop-black-margin", "-j", "0", "--json", "-")
    assert again.exit_code == 0, again.output
    assert (
        FeatureStore(resumed).manifest["black_margins"]
        == FeatureStore(stores["cropped"]).manifest["black_margins"]
    )
    assert "skipped" in again.stdout and '"done"' not in again.stdout


def test_a_video_whose_border_cannot_be_found_fails_alone(tiny_model_dir, tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_text("not a video\n")
    plan = frame_plan(load_encoder(str(tiny_model_dir)).data_config, FPS, crop_black_margin=True)
    chunks = list(iter_video_chunks(VideoJob(3, bad), plan, batch_size=4))
    assert len(chunks) == 1 and chunks[0].last and chunks[0].video_index == 3
    assert str(bad) in chunks[0].error and chunks[0].margin is None


def test_clip_windows_are_cut_by_the_videos_box(root, tiny_model_dir):
    config = load_encoder(str(tiny_model_dir)).data_config
    clip = ClipSampling(3, frame_stride=2)
    job = VideoJob(0, root / "videos" / "video01.mp4")
    found = list(iter_clip_chunks(job, frame_plan(config, FPS, clip=clip, crop_black_margin=True), 64))
    y0, y1, x0, x1 = PICTURE
    box = MarginBox(y0 / HEIGHT, y1 / HEIGHT, x0 / WIDTH, x1 / WIDTH)
    by_hand = list(
        iter_clip_chunks(job, dataclasses.replace(frame_plan(config, FPS, clip=clip), margin=box), 64)
    )
    assert len(found) == len(by_hand) == 1 and torch.equal(found[0].images, by_hand[0].images)
    assert MarginBox.from_dict(found[0].margin) == box and by_hand[0].margin is None


def test_predict_cuts_a_new_videos_border_as_extraction_did(stores, root, tmp_path):
    store = FeatureStore(stores["cropped"])
    dim, classes = store.manifest["feature_dim"], len(store.class_names)
    weight = torch.randn(dim, classes, generator=torch.Generator().manual_seed(0))
    head = LinearProbeHead(torch.zeros(dim), torch.ones(dim), weight, torch.zeros(classes))
    probe = load_probe(
        save_probe(tmp_path / "probe", "linear", head, store.manifest, store.class_names, {}, {})
    )
    options = PredictOptions(device="cpu", num_workers=0, progression=False)
    model = load_probe_encoder(probe, options)
    assert model.plan.crop_black_margin and model.plan.margin is None
    source = VideoSource("video01", root / "videos" / "video01.mp4")
    expected = probe.probabilities(store.read("video01").features)

    offline = predict_videos(probe, model, [source], tmp_path / "out", options).predictions[0]
    np.testing.assert_allclose(offline.probabilities, expected, rtol=0, atol=1e-5)
    online = predict_online(probe, model, source, lambda update: None)
    np.testing.assert_allclose(online.probabilities, expected, rtol=0, atol=1e-5)
    with pytest.raises(ConfigError, match="a pipe cannot be read ahead") as info:
        predict_online(probe, model, VideoSource("stdin", None), lambda update: None, io.BytesIO(b""))
    assert "\n" not in str(info.value)


def test_benchmark_passes_the_crop_on_and_records_it_in_each_cell(monkeypatch, tmp_path):
    configs = []

    def stop(config):
        configs.append(config)
        raise ConfigError("stopped here")

    monkeypatch.setattr(benchmark_runner, "run_benchmark", stop)
    args = [
        "benchmark",
        "--models",
        "plstitch-tiny-synthetic",
        "--datasets",
        "synthetic",
        "--out",
        str(tmp_path),
    ]
    for extra in ([], ["--crop-black-margin"]):
        assert runner.invoke(app, [*args, *extra]).exit_code == 1
    plain, cropped = configs
    assert not plain.extract.crop_black_margin and cropped.extract.crop_black_margin
    settings = [c.settings("m", c.datasets[0], "knn")["extract"] for c in configs]
    assert "crop_black_margin" not in settings[0]  # cells made before the option stay valid
    assert settings[1]["crop_black_margin"] is True
