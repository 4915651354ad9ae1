"""Issue 27 through the CLI: the dataset is checked before a model loads, the default model is announced,
and `plstitch datasets` reads at 80 columns."""

from __future__ import annotations

import inspect
import json
from dataclasses import asdict

import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets.registry import dataset_class, list_datasets
from plstitch_eval.data.synthetic import PARAMS_FILE, VERSION, SyntheticConfig
from plstitch_eval.errors import DataError
from plstitch_eval.extract import extract_features

from .conftest import make_cholec80

runner = CliRunner()


def _extract(root, out, *more):
    # a model that does not exist: any error about it means it was looked at before the dataset
    model = out.parent / "no-such-model"
    args = ["extract", "--dataset", "cholec80", "--root", str(root), "--out", str(out), "--model", str(model)]
    return runner.invoke(app, [*args, "--device", "cpu", *more])


def _one_error_line(result):
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "no-such-model" not in lines[0]  # the model was never looked at
    return lines[0]


def test_a_wrong_root_fails_before_the_model_loads(tmp_path):
    line = _one_error_line(_extract(tmp_path / "nowhere", tmp_path / "s"))
    assert "nowhere: dataset root of 'cholec80' does not exist" in line
    empty = tmp_path / "empty"
    empty.mkdir()
    line = _one_error_line(_extract(empty, tmp_path / "s"))
    assert "phase_annotations: folder of phase annotations is missing" in line
    assert not (tmp_path / "s").exists()


def test_unknown_videos_and_a_foreign_out_fail_before_the_model_loads(cholec_root, tmp_path):
    line = _one_error_line(_extract(cholec_root, tmp_path / "s", "--videos", "video07"))
    assert "Unknown video(s) ['video07']" in line
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    line = _one_error_line(_extract(cholec_root, tmp_path / "mine"))
    assert "is not a feature store" in line
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == ["notes.txt"]  # nothing written there


def test_extract_without_model_says_which_model_it_uses(tmp_path):
    # a one-video dataset that the synthetic adapter takes as already generated (its params.json matches)
    root = make_cholec80(tmp_path / "synthetic", (2,))
    (root / PARAMS_FILE).write_text(json.dumps({"version": VERSION, **asdict(SyntheticConfig())}))
    args = ["extract", "--dataset", "synthetic", "--root", str(root), "--out", str(tmp_path / "s"),
            "--fps", "1", "--num-workers", "0", "--device", "cpu"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    notes = [line for line in result.stderr.splitlines() if "--model" in line]
    expected = (
        "no --model given: using plstitch-tiny-synthetic, the shipped toy model for the synthetic dataset"
    )
    assert notes == [f"note: {expected}"]
    with_model = runner.invoke(app, [*args, "--model", "plstitch-tiny-synthetic"])
    assert with_model.exit_code == 0 and "no --model given" not in with_model.stderr


def test_datasets_reads_at_80_columns():
    result = runner.invoke(app, ["datasets"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    prose = " ".join(line.strip() for line in lines)  # the text read line after line
    for name in list_datasets():
        assert name in lines  # whole, on its own line
        module = inspect.getmodule(dataset_class(name))
        layout = " ".join(inspect.getdoc(module).split("\n\n")[0].split())
        assert layout in prose  # its description reads in one piece, not cut into a narrow column
    assert "split schemes: 40-40, 32-8-40, 40-8-32" in prose


def test_extract_features_checks_the_dataset_before_the_model(tmp_path):
    (tmp_path / "empty").mkdir()  # a root that exists but holds no dataset: found when the layout is read
    with pytest.raises(DataError, match="folder of phase annotations is missing"):
        extract_features("cholec80", str(tmp_path / "no-model"), tmp_path / "s", root=tmp_path / "empty")
    assert not (tmp_path / "s").exists()
