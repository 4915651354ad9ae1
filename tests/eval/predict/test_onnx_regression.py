"""ONNX export of regression probes (`export-onnx` on `--task rsd|anticipation` probes): onnxruntime gives
the torch runtime's minutes (within 1e-4) on a test video - a linear head inside the recognizer, a head
with the elapsed-minutes input and a causal MS-TCN as `head.onnx`; the record names the task. Skipped
without the `onnx` extra."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")
pytest.importorskip("onnx", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")

from plstitch_eval.predict.onnx import ONNX_JSON  # noqa: E402
from tests.eval.predict.conftest import CPU, VIDEO, invoke, read_csv, video_file  # noqa: E402


def _minutes(data, probe, out, *extra) -> tuple[list[str], np.ndarray]:
    done = invoke(
        "predict", "--probe", probe, video_file(data), "--out", out, "--no-progression", *CPU, *extra
    )
    assert done.exit_code == 0, done.output
    header, rows = read_csv(out / f"{VIDEO}.csv")
    columns = header[2:]
    return columns, np.array([[float(r[c]) for c in columns] for r in rows])


@pytest.mark.parametrize("name", ["rsd", "ant", "tcn"])
def test_onnx_minutes_equal_torch(data, regression_probes, tmp_path, name) -> None:
    export = tmp_path / "export"
    done = invoke("export-onnx", regression_probes[name], "--out", export)
    assert done.exit_code == 0, done.output
    record = json.loads((export / ONNX_JSON).read_text())
    assert record["head_output"] == "minutes" and record["task"]["head"] == "regression"
    linear_alone = name == "ant"  # the rsd probe takes the elapsed minutes: its head is not in the recognizer
    assert record["outputs"] == (["features", "minutes"] if linear_alone else ["features"])
    columns, torch_values = _minutes(data, regression_probes[name], tmp_path / "torch")
    onnx_columns, onnx_values = _minutes(data, export, tmp_path / "onnx", "--runtime", "onnx")
    assert onnx_columns == columns and columns[0].endswith("_min")
    assert onnx_values.shape == torch_values.shape and len(onnx_values) > 0
    assert np.abs(onnx_values - torch_values).max() < 1e-4
