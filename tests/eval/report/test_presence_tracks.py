"""The report's presence tracks of multi-label probes: `tool_`, `triplet_` and `cvs_` columns (with the
`present` text beside them, and a several-probe CSV read without its summary) drawn as presence heatmaps."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from plstitch_eval.report.case import CVS, TOOLS, TRIPLETS
from plstitch_eval.report.read import curve_columns, read_case
from tests.eval.predict.conftest import invoke


def _write(path: Path, columns: dict[str, list]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows(zip(*columns.values(), strict=True))


def test_presence_columns_become_tracks_and_present_is_left_out() -> None:
    header = [
        "time_s",
        "frame_index",
        "tool_Hook",
        "triplet_grasper,retract,gallbladder",
        "cvs_C1",
        "present",
    ]
    found = curve_columns(header)
    assert found == {
        TOOLS: {"Hook": "tool_Hook"},
        TRIPLETS: {"grasper,retract,gallbladder": "triplet_grasper,retract,gallbladder"},
        CVS: {"C1": "cvs_C1"},
    }


def test_report_of_a_cvs_and_a_tools_probe_without_a_summary(tmp_path: Path) -> None:
    out = tmp_path / "case"
    out.mkdir()
    p = np.linspace(0.0, 1.0, 6)
    _write(out / "v1.csv", {
        "time_s": [f"{t:.6f}" for t in np.arange(6) * 0.5], "frame_index": list(range(6)),
        "cvs.cvs_C1": p, "cvs.cvs_C2": 1 - p, "cvs.present": ["C2", "C2", "C2", "C1", "C1", "C1"],
        "tools.tool_Hook": p, "tools.present": ["", "", "", "Hook", "Hook", "Hook"],
    })  # fmt: skip
    (video,) = read_case([out])
    cvs = video.curve(CVS)
    assert cvs is not None and list(cvs.columns) == ["C1", "C2"]
    np.testing.assert_allclose(cvs.columns["C2"], 1 - p)
    done = invoke("report", out, "--out", tmp_path / "report.html")
    assert done.exit_code == 0, done.output
    page = (tmp_path / "report.html").read_text()
    assert "Critical view of safety criteria over time" in page and "Tools over time" in page
