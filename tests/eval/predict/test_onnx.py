"""ONNX export (`predict.onnx`): a probe and its encoder as onnxruntime graphs give the torch predictions
(probabilities within 1e-4, the same phase on every sampled frame of the test videos), offline and online; the
graph alone carries what it needs; refusals are one line. Skipped without the `onnx` extra."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

ort = pytest.importorskip("onnxruntime", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")
onnx = pytest.importorskip("onnx", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")

from plstitch_eval.features import FeatureStore  # noqa: E402
from plstitch_eval.predict.onnx import HEAD, ONNX_JSON, RECOGNIZER  # noqa: E402
from plstitch_eval.probes import load_probe  # noqa: E402
from tests.eval.predict.conftest import CPU, invoke, one_error_line, read_csv  # noqa: E402
from tests.eval.predict.test_online import _temporal_probe  # noqa: E402

TEST_VIDEOS = ("video05", "video06")  # the synthetic test split (the last third of six)


@pytest.fixture(scope="module")
def exported(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "export"
    result = invoke("export-onnx", data["probe"], "--out", out)
    assert result.exit_code == 0, result.output
    return out


def _predict(data, probe, out, *extra):
    videos = [data["root"] / "videos" / f"{name}.mp4" for name in TEST_VIDEOS]
    result = invoke("predict", "--probe", probe, *videos, "--out", out, "--no-progression", *CPU, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), {name: read_csv(out / f"{name}.csv")[1] for name in TEST_VIDEOS}


def _check_parity(torch_rows, onnx_rows, class_names) -> None:
    assert set(torch_rows) == set(onnx_rows)
    for name in torch_rows:
        assert len(torch_rows[name]) == len(onnx_rows[name]) > 0
        for a, b in zip(torch_rows[name], onnx_rows[name], strict=True):
            assert a["time_s"] == b["time_s"] and a["predicted"] == b["predicted"]
            p, q = (np.array([float(row[c]) for c in class_names]) for row in (a, b))
            assert np.abs(p - q).max() < 1e-4


def test_onnx_predictions_equal_torch_on_the_test_videos(data, exported, tmp_path):
    class_names = load_probe(data["probe"]).class_names
    torch_summary, torch_rows = _predict(data, data["probe"], tmp_path / "torch")
    onnx_summary, onnx_rows = _predict(data, exported, tmp_path / "onnx", "--runtime", "onnx")
    _check_parity(torch_rows, onnx_rows, class_names)
    assert torch_summary["runtime"] == "torch" and onnx_summary["runtime"] == "onnxruntime"


def test_the_recognizer_graph_alone_gives_features_and_probabilities(data, exported):
    """A deployment without plstitch: prepared uint8 frames in, the store's features and the probe's
    probabilities out, for any batch size; the graph's metadata says how to feed it."""
    from plstitch_eval.predict import PredictOptions, load_probe_encoder
    from plstitch_eval.preprocess import prepare_frame

    probe = load_probe(data["probe"])
    model = load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0, progression=False))
    session = ort.InferenceSession(str(exported / RECOGNIZER), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (80, 96, 3), dtype=np.uint8) for _ in range(5)]
    frames = np.stack([prepare_frame(image, model.plan).numpy() for image in images])
    for batch in (1, 5):
        features, probabilities = session.run(None, {"frames": frames[:batch]})
        expected = model.encode(torch.from_numpy(frames[:batch])).numpy()
        assert np.abs(features - expected).max() < 1e-4
        assert np.abs(probabilities - probe.probabilities(expected)).max() < 1e-4
    meta = {p.key: p.value for p in onnx.load(str(exported / RECOGNIZER)).metadata_props}
    record = json.loads(meta["plstitch"])
    assert record == json.loads((exported / ONNX_JSON).read_text())
    assert record["class_names"] == probe.class_names and record["fps"] == probe.fps
    assert record["plan"]["crop"] == list(model.plan.crop)


def test_a_causal_temporal_probe_online_equals_torch(data, tmp_path):
    probe = _temporal_probe(data, tmp_path / "tcn", causal=True)
    out = tmp_path / "tcn-onnx"
    assert invoke("export-onnx", probe, "--out", out).exit_code == 0
    assert {p.name for p in out.iterdir()} >= {RECOGNIZER, HEAD, ONNX_JSON, "probe.json"}
    video = data["root"] / "videos" / "video05.mp4"
    rows = {}
    for runtime, folder in (("torch", probe), ("onnx", out)):
        result = invoke(
            "predict", "--probe", folder, "--online", video, "--out", tmp_path / runtime,
            "--runtime", runtime, "--no-progression", *CPU,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        rows[runtime] = {"video05": read_csv(tmp_path / runtime / "video05.csv")[1]}
    _check_parity(rows["torch"], rows["onnx"], FeatureStore(data["store"]).class_names)


def test_refusals_are_one_line(data, exported, tmp_path):
    video = data["root"] / "videos" / "video05.mp4"
    line = one_error_line(
        invoke("predict", "--probe", data["probe"], video, "--out", tmp_path, "--runtime", "onnx")
    )
    assert "holds no ONNX export" in line and "plstitch export-onnx" in line
    line = one_error_line(invoke("export-onnx", data["probe"], "--out", exported))
    assert "exists; pass --overwrite" in line
    (tmp_path / "mine").mkdir()
    line = one_error_line(invoke("export-onnx", data["probe"], "--out", tmp_path / "mine", "--overwrite"))
    assert "is not an ONNX export folder" in line  # --overwrite never replaces a folder it did not write
    line = one_error_line(invoke("predict", "--probe", exported, video, "--out", tmp_path, "--runtime", "tf"))
    assert "--runtime must be one of torch, onnx" in line
