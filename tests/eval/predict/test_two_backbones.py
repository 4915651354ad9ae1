"""Probes on two different backbones in one predict run (`predict.backbones`): one decode of each video,
each backbone's encoder on its own crops of the decoded frame once per frame, and each probe's columns equal
to that probe run alone, offline and online; backbones that cannot share a decode are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.extract import ExtractOptions, extract_features
from plstitch_eval.predict import PredictOptions, ProbeSet, VideoSource, predict_online
from plstitch_eval.predict.backbones import load_backbones
from plstitch_eval.probes import load_probe
from tests.eval.predict.conftest import (
    CPU,
    FPS,
    SYNTHETIC,
    VIDEO,
    edited_probe,
    invoke,
    one_error_line,
    read_csv,
    video_file,
)

OTHER = "raw-pixels"  # the second backbone: 8 x 8 pixels, another input size and preprocessing than MODEL


@pytest.fixture(scope="module")
def pixels(data, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A linear probe on raw-pixels features of the same videos and fps (another backbone)."""
    tmp = tmp_path_factory.mktemp("pixels")
    adapter = get_dataset("synthetic", root=data["root"], **SYNTHETIC)
    options = ExtractOptions(fps=FPS, num_workers=0, device="cpu", progress=False)
    assert extract_features(adapter, OTHER, tmp / "store", options).ok
    done = invoke(
        "linear", "--features", tmp / "store", "--epochs", 3, "--device", "cpu", "--save", tmp / "px"
    )
    assert done.exit_code == 0, done.output
    return tmp / "px"


def test_two_backbones_offline_each_probe_equals_it_alone(data, pixels, tmp_path):
    out = tmp_path / "both"
    done = invoke(
        "predict", "--probe", data["probe"], "--probe", pixels, video_file(data), "--out", out,
        "--json", out / "summary.json", *CPU,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert f"on {OTHER} features" in done.stderr  # each probe described with its own encoder
    header, rows = read_csv(out / f"{VIDEO}.csv")
    for prefix, folder in (("probe", data["probe"]), ("px", pixels)):
        alone = invoke("predict", "--probe", folder, video_file(data), "--out", tmp_path / prefix, *CPU)
        assert alone.exit_code == 0, alone.output
        own_header, own_rows = read_csv(tmp_path / prefix / f"{VIDEO}.csv")
        columns = [c for c in own_header if c not in ("time_s", "frame_index", "progression")]
        assert [f"{prefix}.{c}" for c in columns] == [c for c in header if c.startswith(f"{prefix}.")]
        assert len(rows) == len(own_rows) > 5
        for row, own in zip(rows, own_rows, strict=True):
            assert row["time_s"] == own["time_s"]
            assert [row[f"{prefix}.{c}"] for c in columns] == [own[c] for c in columns]
    summary = json.loads((out / "summary.json").read_text())
    assert [p["encoder"] for p in summary["probes"]][1] == OTHER
    assert summary["videos"][0]["frames"] == len(rows)


def test_two_backbones_online_one_pass_each_per_frame(data, pixels):
    probes = ProbeSet.of([load_probe(data["probe"]), load_probe(pixels)])
    assert probes.backbones == 2 and probes.backbone_of == (0, 1)
    models = load_backbones(probes, PredictOptions(device="cpu", num_workers=0))
    assert [m.spec for m in models][1] == OTHER and models[0].plan.crop != models[1].plan.crop
    calls: list[list[tuple]] = [[], []]
    for model, seen in zip(models, calls, strict=True):  # count each encoder's passes and crop shapes
        encode = model.encode
        model.encode = lambda crops, encode=encode, seen=seen: (
            seen.append(tuple(crops.shape)) or encode(crops)
        )
    source = VideoSource(VIDEO, video_file(data))
    rows: list[dict] = []
    case = predict_online(probes, models, source, lambda _: None, on_frame=rows.append)
    assert len(calls[0]) == len(calls[1]) == case.frames == len(rows) > 5  # one pass per backbone per frame
    assert calls[0][0][-2:] == tuple(models[0].plan.crop) and calls[1][0][-2:] == tuple(models[1].plan.crop)
    for prefix, probe, model, part in zip(("probe", "px"), probes.probes, models, case.parts, strict=True):
        alone = predict_online(probe, model, source, lambda _: None)
        np.testing.assert_array_equal(part.frame_times, alone.frame_times)
        np.testing.assert_array_equal(part.probabilities, alone.probabilities)
        assert [r[f"{prefix}.predicted"] for r in rows] == [probe.class_names[i] for i in alone.predicted]


def test_backbones_that_cannot_share_a_decode_are_refused_in_one_line(data, pixels, tmp_path):
    def other_decoder(record: dict) -> None:
        record["preprocessing"]["decoder"] = "torchcodec"

    decoded = edited_probe({"probe": pixels}, tmp_path, other_decoder)
    done = invoke(
        "predict", "--probe", data["probe"], "--probe", decoded, video_file(data), "--out", tmp_path
    )
    line = one_error_line(done)
    assert "different decoders (pyav vs torchcodec)" in line and str(decoded) in line
    assert "pass --decoder pyav" in line and "one plstitch predict per backbone" in line
