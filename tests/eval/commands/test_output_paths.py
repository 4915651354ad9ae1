"""Issue 59 item 2: every output option of every command is checked as it is parsed (`checked_output`), so a
path under a regular file, `--save .` or `export --out .` is one line before any work starts, with nothing
left behind; the probes of the issue, as a user types them."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.resources import model_cards_dir
from tests.eval.protocols.stores import write_store

runner = CliRunner()
OUTPUT_FLAGS = {"--out", "--json", "--jsonl", "--save"}


def _commands(command, path=()):
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def test_every_output_option_of_every_command_is_checked_when_parsed():
    unchecked = [
        f"{name} {param.opts[0]}"
        for name, command in _commands(typer.main.get_command(app))
        for param in command.params
        if OUTPUT_FLAGS & set(getattr(param, "opts", ())) and param.callback is None
    ]
    assert unchecked == []


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    return write_store(tmp_path_factory.mktemp("outputs") / "store").root


@pytest.fixture
def plainfile(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plainfile").write_text("a file of the user's")
    return tmp_path


def _refused(args: list[str], *needles: str):
    result = runner.invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for needle in needles:
        assert needle in lines[0], lines[0]
    return result


def test_knn_json_under_a_file_is_refused_before_it_computes(store, plainfile):
    result = _refused(["knn", "--features", str(store), "--json", "plainfile/x.json"], "plainfile is a file")
    assert result.stdout == ""  # refused before the results, not after printing them


@pytest.mark.parametrize(
    "args",
    [
        ["linear", "--features", "STORE", "--save", "plainfile/p"],
        ["temporal", "--features", "STORE", "--save", "plainfile/p"],
        ["extract", "--dataset", "synthetic", "--model", "raw-pixels", "--out", "plainfile/s"],
        ["predict", "--probe", "probe", "--out", "plainfile/p", "video.mp4"],
        ["train", "--dataset", "synthetic", "--preset", "tiny-cpu", "--out", "plainfile/r"],
        ["export", "run", "--out", "plainfile/e"],
        ["export-onnx", "probe", "--out", "plainfile/o"],
        ["cv", "--features", "STORE", "--json", "plainfile/cv.json"],
        ["benchmark", "--models", "raw-pixels", "--datasets", "synthetic", "--out", "plainfile/b"],
    ],
    ids=lambda args: args[0],
)
def test_an_output_under_a_regular_file_is_one_line(store, plainfile, args):
    args = [str(store) if a == "STORE" else a for a in args]
    _refused(args, "plainfile is a file, not a folder")
    assert sorted(p.name for p in plainfile.iterdir()) == ["plainfile"]


def test_save_dot_in_an_empty_folder_is_one_line_and_leaves_nothing(store, tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    _refused(["linear", "--features", str(store), "--save", "."], "--save . names no folder of its own")
    assert list(empty.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_export_out_dot_with_overwrite_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = model_cards_dir() / "plstitch-tiny-synthetic"
    _refused(["export", str(source), "--out", ".", "--overwrite"], "--out . names no folder of its own")
    assert list(tmp_path.iterdir()) == []
