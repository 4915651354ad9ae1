"""A predict run (`predict.run`): offline predictions equal the evaluation path's, CSV and figure included;
the decoder is the probe's features' unless asked otherwise."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plstitch_eval.analysis.progression import minmax_progress, score_frames
from plstitch_eval.data.video import read_frames
from plstitch_eval.hub.ranking_head import load_temporal_head
from plstitch_eval.predict import PredictOptions, VideoSource, load_probe_encoder
from plstitch_eval.probes import load_probe
from plstitch_eval.store.features import FeatureStore
from tests.eval.predict.conftest import CPU, FPS, MODEL, VIDEO, edited_probe, invoke, read_csv, video_file


def test_predictions_equal_the_evaluation_path(data, tmp_path):
    # the evaluation path: `plstitch extract` of the same video, the probe on the stored features
    extracted = invoke(
        "extract", "--dataset", "cholec80", "--root", data["root"], "--model", MODEL, "--fps", FPS,
        "--videos", VIDEO, "--out", tmp_path / "store", *CPU,
    )  # fmt: skip
    assert extracted.exit_code == 0, extracted.output
    stored = FeatureStore(tmp_path / "store").read(VIDEO)
    probe = load_probe(data["probe"])

    result = invoke("predict", "--probe", data["probe"], video_file(data), "--out", tmp_path / "out", *CPU)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)

    columns, rows = read_csv(tmp_path / "out" / f"{VIDEO}.csv")
    assert columns == ["time_s", "frame_index", "predicted", *probe.class_names, "progression"]
    n_frames = len(list(read_frames(video_file(data), fps=FPS)))
    assert len(rows) == n_frames == len(stored.features) == summary["videos"][0]["frames"]
    probabilities = np.array([[np.float32(row[name]) for name in probe.class_names] for row in rows])
    np.testing.assert_array_equal(probabilities, probe.probabilities(stored.features))
    predicted = [row["predicted"] for row in rows]
    assert predicted == [probe.class_names[i] for i in probe.predict(stored.features)]
    evaluated = json.loads(data["results"].read_text())["predictions"][VIDEO]  # `plstitch linear`'s own
    assert predicted == [probe.class_names[i] for i in evaluated]
    np.testing.assert_allclose([float(row["time_s"]) for row in rows], stored.frame_times, atol=1e-6)
    assert [int(row["frame_index"]) for row in rows] == list(range(n_frames))
    head = load_temporal_head(MODEL)
    progress = minmax_progress(score_frames(stored.features, head))
    np.testing.assert_allclose([float(row["progression"]) for row in rows], progress, atol=1e-6)

    png = tmp_path / "out" / f"{VIDEO}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    video = summary["videos"][0]
    assert video["files"] == {"csv": str(tmp_path / "out" / f"{VIDEO}.csv"), "png": str(png)}
    share = {name: predicted.count(name) / n_frames for name in set(predicted)}
    assert video["class_share"] == pytest.approx(share)
    assert sum(s["frames"] for s in video["segments"]) == n_frames and summary["ok"] is True
    assert not list((tmp_path / "out").glob(".*"))  # atomic writes left no temp file


# ------------------------------------------------------------------------------------------------ decoders


TORCHCODEC_READY = pytest.mark.usefixtures("fresh_torchcodec_detection", "torchcodec_ready")


@TORCHCODEC_READY
def test_predict_with_torchcodec_equals_pyav(data, tmp_path):
    runs = {}
    for decoder in ("pyav", "torchcodec"):
        out = tmp_path / decoder
        result = invoke(
            "predict", "--probe", data["probe"], video_file(data), "--out", out, "--decoder", decoder, *CPU
        )
        assert result.exit_code == 0, result.output
        runs[decoder] = read_csv(out / f"{VIDEO}.csv")
    assert runs["torchcodec"] == runs["pyav"]  # the same frames, pixels, features and probabilities


@TORCHCODEC_READY
def test_predict_decodes_as_the_probe_features_were_made(data, tmp_path):
    from plstitch_eval.predict import predict_decoding

    sources = [VideoSource(VIDEO, video_file(data))]
    pyav_probe = load_probe(data["probe"])
    model = load_probe_encoder(pyav_probe, PredictOptions(device="cpu", progression=False))
    assert predict_decoding(pyav_probe, model, sources, PredictOptions()).decoder == "pyav"
    # a probe of TorchCodec features: loaded (the decoder is not held against it), decoded with TorchCodec
    folder = edited_probe(data, tmp_path, lambda r: r["preprocessing"].update(decoder="torchcodec"))
    tc_probe = load_probe(folder)
    model = load_probe_encoder(tc_probe, PredictOptions(device="cpu", progression=False))
    assert predict_decoding(tc_probe, model, sources, PredictOptions()).decoder == "torchcodec"
    assert predict_decoding(tc_probe, model, sources, PredictOptions(decoder="pyav")).decoder == "pyav"
