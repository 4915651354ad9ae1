"""The probe's encoder (`predict.encoder`): another encoder's weights or preprocessing are refused in
one line; a probe of a transformed store gets that transform."""

from __future__ import annotations

from plstitch_eval.extract import preprocessing_record
from plstitch_eval.hub import load_encoder
from plstitch_eval.predict import PredictOptions, load_probe_encoder
from plstitch_eval.preprocess import frame_plan
from plstitch_eval.probes import LinearProbeHead, load_probe, save_probe
from plstitch_eval.store.features import FeatureStore
from tests.eval.predict.conftest import CPU, FPS, MODEL, edited_probe, invoke, one_error_line, video_file


def test_probe_of_other_weights_is_refused(data, tmp_path):
    real = load_probe(data["probe"]).encoder["weights_sha256"]
    folder = edited_probe(data, tmp_path, lambda r: r["encoder"].update(weights_sha256="ab" * 32))
    line = one_error_line(
        invoke("predict", "--probe", folder, video_file(data), "--out", tmp_path / "o", *CPU)
    )
    assert "abababababab" in line and real[:12] in line and MODEL in line
    assert "probe.json" in line and "--model" not in line  # predict's fix: it takes no --model
    assert not (tmp_path / "o").exists()


def test_probe_of_other_preprocessing_is_refused(data, tmp_path):
    folder = edited_probe(data, tmp_path, lambda r: r["preprocessing"].update(resize_size=96))
    line = one_error_line(
        invoke("predict", "--probe", folder, video_file(data), "--out", tmp_path / "o", *CPU)
    )
    assert '"resize_size": 96' in line and '"resize_size": 73' in line


def test_probe_of_a_transformed_store_gets_that_transform(data, tmp_path):
    # a store extracted with `--transform whole-frame` records a crop mode the model's config does not have
    store = FeatureStore(data["store"])
    squashed = load_encoder(MODEL, transform="whole-frame")
    record = preprocessing_record(squashed.data_config, frame_plan(squashed.data_config, FPS))
    manifest = {**store.manifest, "preprocessing": record}
    head = LinearProbeHead.empty(64, len(store.class_names))
    folder = save_probe(tmp_path / "probe", "linear", head, manifest, store.class_names, {}, {})
    model = load_probe_encoder(load_probe(folder), PredictOptions(device="cpu", progression=False))
    assert model.plan.squash and model.plan.crop == (64, 64)
    assert model.encoder.provenance["transform"] == "whole-frame"
