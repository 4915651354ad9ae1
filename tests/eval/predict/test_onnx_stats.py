"""ONNX export of an encoder whose normalisation is not ImageNet's: the graph normalises with the encoder's
own mean and std. The encoder is raw pixels (8x8x3, features = the normalised crop flattened) registered with
EndoViT's statistics, so the graph's features can be written out in numpy. Skipped without the onnx extra."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

ort = pytest.importorskip("onnxruntime", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")
onnx = pytest.importorskip("onnx", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")

from plstitch_eval.data.datasets import get_dataset  # noqa: E402
from plstitch_eval.extract import ExtractOptions, extract_features  # noqa: E402
from plstitch_eval.hub import DataConfig, ModelEntry  # noqa: E402
from plstitch_eval.hub.model_registry import register, unregister  # noqa: E402
from plstitch_eval.predict import PredictOptions, load_probe_encoder  # noqa: E402
from plstitch_eval.predict.onnx import ONNX_JSON, RECOGNIZER  # noqa: E402
from plstitch_eval.preprocess import IMAGENET_MEAN, prepare_frame  # noqa: E402
from plstitch_eval.probes import load_probe  # noqa: E402
from tests.eval.predict.conftest import FPS, SYNTHETIC, invoke  # noqa: E402
from tests.eval.predict.test_onnx import _check_parity, _predict  # noqa: E402

MODEL = "onnx-test-pixels-endovit-stats"
MEAN, STD = (0.3464, 0.2280, 0.2228), (0.2520, 0.2128, 0.2093)  # EndoViT's own statistics
SIZE = 8
CONFIG = DataConfig(
    input_size=(3, SIZE, SIZE), resize_size=SIZE, crop_pct=1.0, interpolation="bilinear", mean=MEAN, std=STD
)


@pytest.fixture(scope="module")
def stats_probe(data, tmp_path_factory):
    """A linear probe on the synthetic videos' features of the raw-pixels encoder with EndoViT's statistics,
    and its ONNX export; the encoder is registered while the module runs."""
    tmp = tmp_path_factory.mktemp("onnx-stats")
    register(ModelEntry(MODEL, "pixels_8x8x3", 3 * SIZE * SIZE, "pixels", data_config=CONFIG, license="test"))
    try:
        adapter = get_dataset("synthetic", root=data["root"], **SYNTHETIC)
        options = ExtractOptions(fps=FPS, num_workers=0, device="cpu", progress=False)
        assert extract_features(adapter, MODEL, tmp / "store", options).ok
        result = invoke(
            "linear", "--features", tmp / "store", "--epochs", 5, "--device", "cpu", "--save", tmp / "probe"
        )
        assert result.exit_code == 0, result.output
        result = invoke("export-onnx", tmp / "probe", "--out", tmp / "export")
        assert result.exit_code == 0, result.output
        yield {"root": data["root"], "probe": tmp / "probe", "export": tmp / "export"}
    finally:
        unregister(MODEL)


def test_the_graph_normalises_with_the_encoders_own_statistics(stats_probe):
    """Prepared uint8 frames in: features = ((x / 255 - mean) / std) flattened channel-major, with EndoViT's
    mean and std, as torch computes them; the probabilities are the probe's on those features."""
    probe = load_probe(stats_probe["probe"])
    model = load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0, progression=False))
    assert model.plan.mean == MEAN and model.plan.std == STD and MEAN != IMAGENET_MEAN
    session = ort.InferenceSession(
        str(stats_probe["export"] / RECOGNIZER), providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (40, 48, 3), dtype=np.uint8) for _ in range(4)]
    frames = np.stack([prepare_frame(image, model.plan).numpy() for image in images])
    assert frames.shape == (4, 3, SIZE, SIZE) and frames.dtype == np.uint8
    mean, std = (np.array(v, dtype=np.float64)[None, :, None, None] for v in (MEAN, STD))
    expected = ((frames / 255.0 - mean) / std).reshape(len(frames), -1)
    features, probabilities = session.run(None, {"frames": frames})
    np.testing.assert_allclose(features, expected, rtol=0, atol=1e-5)
    np.testing.assert_allclose(features, model.encode(torch.from_numpy(frames)).numpy(), rtol=0, atol=1e-5)
    np.testing.assert_allclose(probabilities, probe.probabilities(expected), rtol=0, atol=1e-4)
    record = json.loads((stats_probe["export"] / ONNX_JSON).read_text())
    assert record["plan"]["mean"] == list(MEAN) and record["plan"]["std"] == list(STD)


def test_onnx_predictions_equal_torch_with_other_statistics(stats_probe, tmp_path):
    class_names = load_probe(stats_probe["probe"]).class_names
    _, torch_rows = _predict(stats_probe, stats_probe["probe"], tmp_path / "torch")
    _, onnx_rows = _predict(stats_probe, stats_probe["export"], tmp_path / "onnx", "--runtime", "onnx")
    _check_parity(torch_rows, onnx_rows, class_names)
