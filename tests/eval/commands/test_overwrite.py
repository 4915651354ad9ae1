"""Issue 59 item 1: `--overwrite` deletes only what plstitch wrote; a folder holding anything else is refused
in one line naming the first foreign entry, before any work, and nothing is deleted (export, a probe's --save,
export-onnx; extract: tests/eval/extract/test_trust.py; train: tests/train/test_run_folder.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.resources import model_cards_dir
from tests.eval.protocols.stores import write_store

runner = CliRunner()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def _refused(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and needle in lines[0], lines


def test_export_overwrite_never_deletes_a_users_thesis(tmp_path):
    myfolder = tmp_path / "myfolder"
    myfolder.mkdir()
    (myfolder / "thesis.tex").write_text("p")
    source = model_cards_dir() / "plstitch-tiny-synthetic"
    _refused(
        ["export", str(source), "--out", str(myfolder), "--overwrite"], "holds thesis.tex, which plstitch"
    )
    assert _snapshot(myfolder) == {"thesis.tex": b"p"}
    assert [p.name for p in tmp_path.iterdir()] == ["myfolder"]  # no temp folder left beside it


@pytest.mark.parametrize("command", ["linear", "temporal"])
def test_a_probe_folder_with_a_users_file_is_not_replaced(tmp_path, command):
    store = write_store(tmp_path / "store").root
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "probe.json").write_text(json.dumps({"schema": "plstitch.probe/v1"}))
    (probe / "probe.safetensors").write_bytes(b"weights")
    (probe / "analysis").mkdir()
    (probe / "analysis" / "notes.md").write_text("mine")
    before = _snapshot(probe)
    args = [command, "--features", str(store), "--save", str(probe), "--overwrite"]
    _refused(args, "holds analysis/, which plstitch did not write; --overwrite deletes only a probe")
    assert _snapshot(probe) == before


def test_export_onnx_overwrite_keeps_a_users_file(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "export"
    out.mkdir()
    for name in ("onnx.json", "recognizer.onnx", "head.onnx", "probe.json", "probe.safetensors"):
        (out / name).write_text("plstitch's")
    (out / "mine.txt").write_text("mine")
    before = _snapshot(out)
    _refused(["export-onnx", str(tmp_path / "no-probe"), "--out", str(out), "--overwrite"], "holds mine.txt")
    assert _snapshot(out) == before
