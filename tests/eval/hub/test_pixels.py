"""`raw-pixels`: features are the frame downsampled to 8x8x3 in [0, 1], checked against plain torch.

The independent reference is `torch.nn.functional.interpolate(uint8, mode="bilinear", antialias=True)` on the
uint8 frame, then the centre crop written out here: its uint8 levels match the pipeline's bit for bit
(torchvision resizes uint8 with that torch kernel); the features are those levels / 255 (to float rounding).
A float interpolation or PIL's BILINEAR resize rounds differently (within one grey level): a tolerance check.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.video import read_frames
from plstitch_eval.errors import DataError
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.architectures.pixels import PIXELS_DATA_CONFIG, RawPixels
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.store.features import FeatureStore
from tests.eval.extract.conftest import make_cholec80


def reference_pixels(frame: np.ndarray, side: int = 8) -> torch.Tensor:
    """uint8 HxWx3 -> shorter side `side` (bilinear, antialias), centre crop side x side; uint8 C,H,W flat."""
    x = torch.from_numpy(np.ascontiguousarray(frame)).permute(2, 0, 1)[None]
    h, w = x.shape[-2:]
    size = (side, int(side * w / h)) if h <= w else (int(side * h / w), side)
    small = F.interpolate(x, size=size, mode="bilinear", antialias=True, align_corners=False)[0]
    top, left = round((size[0] - side) / 2), round((size[1] - side) / 2)
    crop = small[:, top : top + side, left : left + side]
    return crop.flatten()


def assert_levels(features: torch.Tensor, levels: torch.Tensor) -> None:
    """`features` are exactly the uint8 `levels` scaled to [0, 1]."""
    assert torch.equal(torch.round(features * 255).to(torch.uint8), levels)
    torch.testing.assert_close(features, levels.float() / 255, rtol=0, atol=1e-7)


@pytest.fixture(scope="module")
def pixels():
    return load_encoder("raw-pixels")


@pytest.mark.parametrize("shape", [(64, 64), (48, 64), (60, 45), (8, 12)])
def test_features_equal_the_downsampled_frame(pixels, shape):
    frame = np.random.default_rng(sum(shape)).integers(0, 256, (*shape, 3), dtype=np.uint8)
    expected = reference_pixels(frame)
    with torch.inference_mode():
        single = pixels(pixels.transform(frame)[None])[0]
        batched = pixels(pixels.preprocess_batch(torch.from_numpy(frame)[None]))[0]
    assert single.shape == (192,) and pixels.feature_dim == 192
    assert_levels(single, expected)
    assert torch.equal(batched, single)
    assert float(single.min()) >= 0.0 and float(single.max()) <= 1.0
    # float interpolation: the same filter, rounded differently (within one uint8 level)
    x = torch.from_numpy(frame).permute(2, 0, 1)[None].float()
    h, w = shape
    size = (8, int(8 * w / h)) if h <= w else (int(8 * h / w), 8)
    smooth = F.interpolate(x, size=size, mode="bilinear", antialias=True)[0] / 255
    top, left = round((size[0] - 8) / 2), round((size[1] - 8) / 2)
    assert torch.allclose(single, smooth[:, top : top + 8, left : left + 8].flatten(), atol=1 / 255 + 1e-6)


def test_uniform_frame_gives_its_colour(pixels):
    frame = np.empty((40, 56, 3), np.uint8)
    frame[...] = (10, 128, 250)
    with torch.inference_mode():
        features = pixels(pixels.transform(frame)[None])[0]
    assert_levels(features, torch.tensor([10, 128, 250], dtype=torch.uint8).repeat_interleave(64))


def test_registry_entry_and_parameter_free_module(pixels):
    entry = MODELS["raw-pixels"]
    assert entry.converter == "pixels" and entry.feature_dim == 192 and not entry.has_weights
    assert entry.license == "n/a (no weights)"
    assert entry.description == "reference row: each frame downsampled to 8x8x3, no learning"
    assert pixels.data_config == PIXELS_DATA_CONFIG
    assert PIXELS_DATA_CONFIG.mean == (0.0, 0.0, 0.0) and PIXELS_DATA_CONFIG.std == (1.0, 1.0, 1.0)
    assert PIXELS_DATA_CONFIG.interpolation == "bilinear" and PIXELS_DATA_CONFIG.resize_size == 8
    assert list(pixels.parameters()) == [] and pixels.state_dict() == {}
    assert pixels.device == torch.device("cpu")
    assert pixels.provenance["spec"] == "raw-pixels" and pixels.provenance["sha256"] is None
    assert RawPixels().to("meta").device_anchor.device.type == "meta"  # the buffer follows .to()
    with pytest.raises(DataError, match="raw-pixels expects"):
        pixels(torch.zeros(1, 3, 16, 16))


def test_models_lists_it_and_download_explains():
    runner = CliRunner()
    result = runner.invoke(app, ["models", "--json", "-"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["raw-pixels"]["license"] == "n/a (no weights)" and rows["raw-pixels"]["cached"] is True
    assert rows["raw-pixels"]["feature_dim"] == 192
    result = runner.invoke(app, ["download", "raw-pixels"])  # usable as it is (issue 44): says so, exit 0
    assert result.exit_code == 0 and "built in (no weights); nothing to download" in result.output


def test_extract_through_the_feature_store(tmp_path):
    root = make_cholec80(tmp_path / "c80", seconds=(2, 3))
    out = tmp_path / "store"
    options = ExtractOptions(fps=5.0, batch_size=4, num_workers=0, device="cpu", progress=False)
    summary = extract_features("cholec80", "raw-pixels", out, options, root=root)
    assert summary.ok
    store = FeatureStore(out)
    assert store.manifest["model"]["spec"] == "raw-pixels" and store.manifest["feature_dim"] == 192
    for record in get_dataset("cholec80", root=root).videos():
        frames = list(read_frames(record.source, fps=5.0))
        expected = torch.stack([reference_pixels(f.image) for f in frames])
        assert_levels(torch.from_numpy(store.read(record.name).features), expected)
    again = extract_features("cholec80", "raw-pixels", out, options, root=root)  # resumes, nothing new
    assert [r.status for r in again.results] == ["skipped", "skipped"]


def test_extract_command_takes_raw_pixels(tmp_path):
    root = make_cholec80(tmp_path / "c80", seconds=(2,))
    out = tmp_path / "store"
    args = [
        "extract",
        "--dataset",
        "cholec80",
        "--root",
        str(root),
        "--model",
        "raw-pixels",
        "--out",
        str(out),
    ]
    result = CliRunner().invoke(app, [*args, "--fps", "2", "--device", "cpu", "-j", "0"])
    assert result.exit_code == 0, result.output
    assert FeatureStore(out).read("video01").features.shape == (4, 192)
