"""Several `--probe` in one predict run (`predict.probeset`, `predict.case`): each probe's columns, prefixed,
equal that probe run alone, offline and online; the encoder runs once per frame; probes of different
frame rates are refused in one line (probes on different backbones: `test_two_backbones`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.predict import (
    PredictOptions,
    ProbeSet,
    VideoSource,
    load_probe_encoder,
    predict_online,
    predict_videos,
)
from plstitch_eval.predict.serve import CaseState, LatencyWindow
from plstitch_eval.probes import load_probe
from plstitch_eval.report.case import NEXT, REMAINING
from plstitch_eval.report.read import read_case
from tests.eval.predict.conftest import (
    CPU,
    VIDEO,
    edited_probe,
    invoke,
    one_error_line,
    read_csv,
    video_file,
)

PREFIXES = ("probe", "rsd", "ant")  # the probes' folder names


def _folders(data, regression_probes) -> list:
    return [data["probe"], regression_probes["rsd"], regression_probes["ant"]]


def test_three_probes_offline_equal_each_alone_with_prefixed_columns(data, regression_probes, tmp_path):
    folders = _folders(data, regression_probes)
    probes = [arg for folder in folders for arg in ("--probe", folder)]
    out = tmp_path / "three"
    done = invoke("predict", *probes, video_file(data), "--out", out, "--json", out / "summary.json", *CPU)
    assert done.exit_code == 0, done.output
    header, rows = read_csv(out / f"{VIDEO}.csv")
    assert header[:3] == ["time_s", "frame_index", "probe.predicted"]
    for prefix, folder in zip(PREFIXES, folders, strict=True):
        alone = invoke("predict", "--probe", folder, video_file(data), "--out", tmp_path / prefix, *CPU)
        assert alone.exit_code == 0, alone.output
        own_header, own_rows = read_csv(tmp_path / prefix / f"{VIDEO}.csv")
        columns = [c for c in own_header if c not in ("time_s", "frame_index", "progression")]
        assert [f"{prefix}.{c}" for c in columns] == [c for c in header if c.startswith(f"{prefix}.")]
        for row, own in zip(rows, own_rows, strict=True):
            assert row["time_s"] == own["time_s"] and row.get("progression") == own.get("progression")
            assert [row[f"{prefix}.{c}"] for c in columns] == [own[c] for c in columns]
        assert (out / f"{VIDEO}.{prefix}.png").is_file()
    assert not (out / f"{VIDEO}.png").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert [p["prefix"] for p in summary["probes"]] == list(PREFIXES)
    video = summary["videos"][0]
    assert video["frames"] == len(rows) and set(video["probes"]) == set(PREFIXES)
    assert "class_share" in video["probes"]["probe"] and "last_min" in video["probes"]["rsd"]
    # the case report reads each probe's columns back: the phases, the remaining time, the anticipation
    (case,) = read_case([out])
    assert case.phases.class_names == load_probe(folders[0]).class_names
    assert [case.phases.class_names[i] for i in case.phases.predicted] == [
        row["probe.predicted"] for row in rows
    ]
    assert sorted(curve.kind for curve in case.curves) == [NEXT, REMAINING]
    report = invoke("report", out, "--out", tmp_path / "report.html")
    assert report.exit_code == 0 and (tmp_path / "report.html").is_file(), report.output


def test_three_probes_online_share_one_encoder_pass_per_frame(data, regression_probes, tmp_path):
    probes = [load_probe(folder) for folder in _folders(data, regression_probes)]
    model = load_probe_encoder(probes[0], PredictOptions(device="cpu", num_workers=0))
    calls: list[int] = []
    encode = model.encode
    model.encode = lambda crops: calls.append(len(crops)) or encode(crops)  # count the encoder's passes
    source = VideoSource(VIDEO, video_file(data))
    rows: list[dict] = []
    case = predict_online(ProbeSet.of(probes), model, source, lambda _: None, on_frame=rows.append)
    assert calls == [1] * case.frames and case.frames == len(rows) > 5
    assert case.wall_seconds > 0 and case.ended == "end of recording"
    for prefix, probe, part in zip(PREFIXES, probes, case.parts, strict=True):
        alone = predict_online(probe, model, source, lambda _: None)
        np.testing.assert_array_equal(part.frame_times, alone.frame_times)
        if probe.is_regression:
            np.testing.assert_array_equal(part.values, alone.values)
            first = [rows[0][f"{prefix}.{c}"] for c in probe.value_columns]
            np.testing.assert_allclose(first, alone.values[0], rtol=1e-12)
        else:
            np.testing.assert_array_equal(part.probabilities, alone.probabilities)
            assert [r[f"{prefix}.predicted"] for r in rows] == [probe.class_names[i] for i in alone.predicted]
    assert "predicted" not in rows[0]  # every probe field carries its probe
    offline = predict_videos(
        ProbeSet.of(probes), model, [source], tmp_path / "out", PredictOptions(num_workers=0)
    )
    whole = offline.predictions[0]
    np.testing.assert_allclose(whole.parts[0].probabilities, case.parts[0].probabilities, atol=1e-6)


def test_online_jsonl_names_each_probe(data, regression_probes, tmp_path):
    folders = _folders(data, regression_probes)[:2]
    lines = tmp_path / "frames.jsonl"
    done = invoke(
        "predict", "--probe", folders[0], "--probe", folders[1], video_file(data), "--online",
        "--jsonl", lines, *CPU,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    first = json.loads(lines.read_text().splitlines()[0])
    assert {"probe.predicted", "rsd.remaining_min", "latency_s", "time_s"} <= set(first)
    second = done.stdout.splitlines()[0]  # each probe in the per-second line
    assert " s  probe: " in second and " | rsd: remaining " in second and "latency=" in second


def test_probes_of_different_frame_rates_are_refused_in_one_line(data, tmp_path):
    other = edited_probe(data, tmp_path, lambda record: record.update(fps=1.0))
    done = invoke("predict", "--probe", data["probe"], "--probe", other, video_file(data), "--out", tmp_path)
    line = one_error_line(done)
    assert "different frame rates (2 vs 1 fps)" in line and str(other) in line
    assert "one plstitch predict per frame rate" in line
    with pytest.raises(ConfigError, match="at least one"):
        ProbeSet.of([])
    onnx = invoke(
        "predict", "--probe", data["probe"], "--probe", data["probe"], video_file(data),
        "--out", tmp_path / "o", "--runtime", "onnx", *CPU,
    )  # fmt: skip
    assert "--runtime onnx runs one exported probe" in one_error_line(onnx)


def test_same_folder_names_get_distinct_prefixes(data, regression_probes):
    probe = load_probe(data["probe"])
    assert ProbeSet.of([probe, probe]).prefixes == ("probe-phases-1", "probe-phases-2")
    rsd = load_probe(regression_probes["rsd"])
    assert ProbeSet.of([probe, rsd]).prefixes == ("probe", "rsd")


def test_case_state_reads_the_phase_probe_of_several():
    state = CaseState(["A", "B"], ["rsd.remaining_min"], "src", phase_probe="phases")
    row = {"time_s": 0.5, "phases.predicted": "B", "phases.A": 0.3, "phases.B": 0.7, "rsd.remaining_min": 4.0}
    event = state.add(row)
    assert event["predicted"] == "B" and event["probabilities"] == {"A": 0.3, "B": 0.7}
    assert event["values"] == {"rsd.remaining_min": 4.0} and event["phase_probe"] == "phases"
    assert state.segments == [[0.5, 0.5, 1]]


def test_latency_window_equals_numpy_quantiles_over_the_last_frames():
    rng = np.random.default_rng(0)
    window = LatencyWindow(size=50)
    seen: list[float] = []
    for value in rng.exponential(0.02, 400):
        window.add(float(value))
        seen.append(float(value))
        for q in (0.5, 0.99):
            assert window.quantile(q) == pytest.approx(np.quantile(seen[-50:], q), abs=1e-12)
