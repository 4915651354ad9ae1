"""`plstitch predict` with a multi-label (tools) probe saved by `linear --task tools --save`: a probability
column per tool (`tool_<name>`) equal to the evaluation path's, `present` (the tools above threshold) in the
JSON lines of an online run from a file, beside a phase probe (prefixed columns, the phase probe still the
page's), the report's tools track from those columns, and ONNX parity with torch."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from plstitch_eval.predict.heads import frame_fields, headline
from plstitch_eval.predict.probeset import ProbeSet
from plstitch_eval.predict.serve import open_page, serve_settings
from plstitch_eval.probes import load_probe
from plstitch_eval.store.features import FeatureStore
from tests.eval.predict.conftest import CPU, VIDEO, invoke, read_csv, video_file


@pytest.fixture(scope="module")
def tools(data, tmp_path_factory: pytest.TempPathFactory):
    """The tools probe of the package's store (3 epochs) and its offline prediction of one video."""
    tmp = tmp_path_factory.mktemp("tools-probe")
    done = invoke("linear", "--features", data["store"], "--task", "tools", "--epochs", 3, *CPU[:2],
                  "--save", tmp / "tools")  # fmt: skip
    assert done.exit_code == 0, done.output
    out = tmp / "out"
    done = invoke(
        "predict", "--probe", tmp / "tools", video_file(data), "--out", out, "--no-progression", *CPU
    )
    assert done.exit_code == 0, done.output
    return {"probe": tmp / "tools", "out": out}


def _matrix(rows: list[dict[str, str]], columns: list[str]) -> np.ndarray:
    return np.array([[float(r[c]) for c in columns] for r in rows])


def test_offline_csv_has_a_probability_column_per_tool_equal_to_the_store_path(data, tools) -> None:
    probe = load_probe(tools["probe"])
    names = FeatureStore(data["store"]).manifest["tool_names"]
    assert probe.class_names == names
    header, rows = read_csv(tools["out"] / f"{VIDEO}.csv")
    columns = [f"tool_{n}" for n in names]
    assert header[:2] == ["time_s", "frame_index"] and header[2 : 2 + len(columns)] == columns
    got = _matrix(rows, columns)
    expected = probe.probabilities(FeatureStore(data["store"]).read(VIDEO).features)
    assert got.shape == expected.shape and ((got >= 0) & (got <= 1)).all()
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert header[-1] == "present" and any(r["present"] for r in rows)
    for row, p in zip(rows, got, strict=True):
        assert row["present"] == ";".join(n for n, v in zip(names, p, strict=True) if v > 0.5)


def test_online_from_a_file_writes_present_equal_to_the_thresholded_probabilities(data, tools, tmp_path):
    lines = tmp_path / "lines.jsonl"
    done = invoke("predict", "--probe", tools["probe"], video_file(data), "--online", "--jsonl", lines,
                  "--out", tmp_path / "online", *CPU)  # fmt: skip
    assert done.exit_code == 0, done.output
    probe = load_probe(tools["probe"])
    rows = [json.loads(line) for line in lines.read_text().splitlines()]
    assert rows and all(probe.value_columns[0] in row for row in rows)
    for row in rows:
        p = np.array([row[c] for c in probe.value_columns])
        assert row["present"] == ";".join(n for n, v in zip(probe.class_names, p, strict=True) if v > 0.5)
    assert any(row["present"] for row in rows), "no tool present in any frame: the check saw nothing"
    _, offline = read_csv(tools["out"] / f"{VIDEO}.csv")
    online = np.array([[row[c] for c in probe.value_columns] for row in rows])
    np.testing.assert_allclose(online, _matrix(offline, probe.value_columns), atol=1e-4)  # causal head


def test_one_frames_fields_and_words(tools) -> None:
    probe = load_probe(tools["probe"])
    k = len(probe.class_names)
    p = np.linspace(0.05, 0.95, k)
    fields = frame_fields(probe, None, None, p)
    assert list(fields) == [*probe.value_columns, "present"]
    assert fields["present"] == ";".join(n for n, v in zip(probe.class_names, p, strict=True) if v > 0.5)
    assert headline(probe, np.full(k, 0.9)) == ", ".join(probe.class_names) + " present"
    assert headline(probe, np.zeros(k)) == "no tools present"


def test_beside_a_phase_probe_columns_are_prefixed_and_the_phase_probe_leads(data, tools, tmp_path) -> None:
    tools_probe, phase_probe = load_probe(tools["probe"]), load_probe(data["probe"])
    found = ProbeSet.of([tools_probe, phase_probe]).phase_probe
    assert found is not None and found[1] is phase_probe  # the tools probe never drives the ribbon
    pytest.importorskip("uvicorn", reason="the serve extra (pip install 'plstitch[serve]') is not installed")
    page = open_page(serve_settings("127.0.0.1:0"), ProbeSet.of([tools_probe, phase_probe]), ["src"])
    page.close()
    assert page.state.classes == phase_probe.class_names and page.state.phase_probe == "probe"
    assert page.state.values == [f"tools.{c}" for c in [*tools_probe.value_columns, "present"]]
    done = invoke("predict", "--probe", tools["probe"], "--probe", data["probe"], video_file(data),
                  "--out", tmp_path / "both", "--no-progression", *CPU)  # fmt: skip
    assert done.exit_code == 0, done.output
    header, rows = read_csv(tmp_path / "both" / f"{VIDEO}.csv")
    assert "tools.tool_Grasper" in header and "probe.predicted" in header
    _, alone = read_csv(tools["out"] / f"{VIDEO}.csv")
    columns = tools_probe.value_columns
    np.testing.assert_allclose(_matrix(rows, [f"tools.{c}" for c in columns]), _matrix(alone, columns))
    done = invoke("report", tmp_path / "both", "--out", tmp_path / "report.html")
    assert done.exit_code == 0, done.output
    page = (tmp_path / "report.html").read_text()
    assert "Tools over time" in page and "Time per phase" in page


def test_report_draws_the_tools_track_of_a_tools_probe_alone(tools, tmp_path) -> None:
    done = invoke("report", tools["out"], "--out", tmp_path / "report.html")
    assert done.exit_code == 0, done.output
    assert "Tools over time" in (tmp_path / "report.html").read_text()


def test_onnx_export_gives_torchs_probabilities(data, tools, tmp_path) -> None:
    pytest.importorskip("onnxruntime", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")
    pytest.importorskip("onnx", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")
    import onnxruntime

    export = tmp_path / "export"
    done = invoke("export-onnx", tools["probe"], "--out", export)
    assert done.exit_code == 0, done.output
    record = json.loads((export / "onnx.json").read_text())
    assert record["task"]["head"] == "multi-label" and record["outputs"] == ["features", "probabilities"]
    probe = load_probe(tools["probe"])
    x = FeatureStore(data["store"]).read(VIDEO).features
    head = onnxruntime.InferenceSession(str(export / "head.onnx"), providers=["CPUExecutionProvider"])
    logits = head.run(["logits"], {"features": x})[0]
    np.testing.assert_allclose(
        1.0 / (1.0 + np.exp(-logits.astype(np.float64))), probe.probabilities(x), atol=1e-5
    )
    recognizer = onnxruntime.InferenceSession(
        str(export / "recognizer.onnx"), providers=["CPUExecutionProvider"]
    )
    frames = np.random.default_rng(0).integers(0, 256, (3, 3, *record["plan"]["crop"]), dtype=np.uint8)
    features, probabilities = recognizer.run(["features", "probabilities"], {"frames": frames})
    np.testing.assert_allclose(probabilities, probe.probabilities(features), atol=1e-5)
    onnx_out = tmp_path / "onnx"
    done = invoke("predict", "--probe", export, video_file(data), "--out", onnx_out, "--runtime", "onnx",
                  "--no-progression", *CPU)  # fmt: skip
    assert done.exit_code == 0, done.output
    _, via_onnx = read_csv(tmp_path / "onnx" / f"{VIDEO}.csv")
    _, via_torch = read_csv(tools["out"] / f"{VIDEO}.csv")
    columns = probe.value_columns
    np.testing.assert_allclose(_matrix(via_onnx, columns), _matrix(via_torch, columns), atol=1e-5)


def test_a_causal_temporal_tools_probe_runs_offline_online_and_through_onnx(data, tmp_path) -> None:
    """`temporal --task tools --causal --save`: the multi-label MS-TCN as a probe - offline it gives the
    probe's own probabilities of the stored features, online (frame by frame, causal) the same, and its ONNX
    export the same again."""
    small = ["--stages", "2", "--layers", "3", "--channels", "8", "--epochs", "2", "--causal"]
    done = invoke(
        "temporal", "--features", data["store"], "--task", "tools", *small, "--save", tmp_path / "t"
    )
    assert done.exit_code == 0, done.output
    probe = load_probe(tmp_path / "t")
    assert probe.kind == "temporal" and probe.is_multilabel and probe.causal
    offline = tmp_path / "offline"
    done = invoke("predict", "--probe", tmp_path / "t", video_file(data), "--out", offline, *CPU)
    assert done.exit_code == 0, done.output
    _, rows = read_csv(offline / f"{VIDEO}.csv")
    columns = probe.value_columns
    expected = probe.probabilities(FeatureStore(data["store"]).read(VIDEO).features)
    np.testing.assert_allclose(_matrix(rows, columns), expected, atol=1e-4)
    lines = tmp_path / "lines.jsonl"
    done = invoke("predict", "--probe", tmp_path / "t", video_file(data), "--online", "--jsonl", lines,
                  "--out", tmp_path / "online", *CPU)  # fmt: skip
    assert done.exit_code == 0, done.output
    online = np.array([[json.loads(line)[c] for c in columns] for line in lines.read_text().splitlines()])
    np.testing.assert_allclose(online, _matrix(rows, columns), atol=1e-4)
    if importlib.util.find_spec("onnxruntime") is None or importlib.util.find_spec("onnx") is None:
        pytest.skip("the onnx extra (pip install 'plstitch[onnx]') is missing: torch and online checked")
    done = invoke("export-onnx", tmp_path / "t", "--out", tmp_path / "export")
    assert done.exit_code == 0, done.output
    done = invoke("predict", "--probe", tmp_path / "export", video_file(data), "--out", tmp_path / "onnx",
                  "--runtime", "onnx", *CPU)  # fmt: skip
    assert done.exit_code == 0, done.output
    _, via_onnx = read_csv(tmp_path / "onnx" / f"{VIDEO}.csv")
    np.testing.assert_allclose(_matrix(via_onnx, columns), _matrix(rows, columns), atol=1e-5)
    assert [r["present"] for r in via_onnx] == [r["present"] for r in rows]
