"""Outputs (`predict.outputs`): existing output files are refused unless --overwrite."""

from __future__ import annotations

from tests.eval.predict.conftest import CPU, VIDEO, invoke, one_error_line, video_file


def test_existing_outputs_are_refused_unless_overwrite(data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{VIDEO}.png").write_bytes(b"keep me")
    args = ("predict", "--probe", data["probe"], video_file(data), "--out", out, *CPU)
    line = one_error_line(invoke(*args))
    assert str(out / f"{VIDEO}.png") in line and "--overwrite" in line
    assert (out / f"{VIDEO}.png").read_bytes() == b"keep me" and not (out / f"{VIDEO}.csv").exists()
    assert invoke(*args, "--overwrite").exit_code == 0
    assert (out / f"{VIDEO}.png").read_bytes()[:4] == b"\x89PNG"
