"""`plstitch linear` and `plstitch cv` show the probe's progress on stderr (plain lines when stderr is a file
or a pipe) and keep stdout clean; a benchmark cell shows none; a store that cannot give validation videos is
refused in one line that says how to record a val split."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.cli import app
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols import get_protocol
from tests.eval.evaluate.conftest import make_store
from tests.eval.evaluate.test_tool_presence import make_tool_store

REPO = Path(__file__).resolve().parents[3]
HEADS = 18  # the default grid: 6 learning rates x 3 weight decays
PHASE_LINE = re.compile(rf"^linear probe \({HEADS} heads\): \d+/\d+ \(\d+%\)  epoch \d+/\d+  elapsed ")
TOOL_LINE = re.compile(rf"^tool probe \({HEADS} heads\): \d+/\d+ \(\d+%\)  epoch \d+/\d+  elapsed ")
runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def progress_lines(stderr: str, pattern: re.Pattern[str]) -> list[str]:
    return [line for line in stderr.splitlines() if pattern.match(line)]


def one_error(result) -> str:
    """The single `error:` line of a refused run (exit 1, no traceback)."""
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.output
    assert "Traceback" not in result.output
    return errors[0]


# ------------------------------------------------------------------------------------------------ progress


def test_linear_prints_progress_lines_to_a_file_and_keeps_stdout_json(tmp_path: Path) -> None:
    """Run as a user would with `2> log`: stderr is a file, so plain lines (no live bar) while it trains."""
    store = make_store(tmp_path / "store")
    log = tmp_path / "stderr.log"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    command = [
        sys.executable, "-m", "plstitch_eval", "linear", "--features", str(store.root), "--epochs", "3",
        "--device", "cpu", "--json", "-",
    ]  # fmt: skip
    with log.open("w") as stderr:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=REPO, timeout=300)
    said = log.read_text()
    assert done.returncode == 0, said
    results = json.loads(done.stdout)  # stdout holds the JSON alone
    assert results["task"] == "linear"
    lines = progress_lines(said, PHASE_LINE)
    assert len(lines) >= 2, said  # after the first step, and when the grid is trained
    assert "(100%)" in lines[-1] and "epoch 3/3" in lines[-1], lines
    assert "\r" not in said and "\x1b[" not in said  # no live bar drawn into the file


def test_linear_task_tools_prints_progress_lines(tmp_path: Path) -> None:
    store = make_tool_store(tmp_path / "s")
    result = invoke("linear", "-f", store.root, "--task", "tools", "--epochs", 2, "--json", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["task"] == "linear-tools"
    lines = progress_lines(result.stderr, TOOL_LINE)
    assert lines and "(100%)" in lines[-1], result.stderr


def test_quiet_mutes_the_progress_lines(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store")
    result = invoke("-q", "linear", "--features", store.root, "--epochs", 2, "--device", "cpu")
    assert result.exit_code == 0, result.output
    assert not progress_lines(result.stderr, PHASE_LINE), result.stderr


def test_cv_of_the_linear_probe_prints_each_folds_progress(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", n_videos=9)
    result = invoke(
        "cv", "--features", store.root, "--protocol", "linear", "--folds", 3, "--epochs", 2, "--json", "-"
    )
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["folds"]) == 3
    finished = [line for line in progress_lines(result.stderr, PHASE_LINE) if "(100%)" in line]
    assert len(finished) == 3, result.stderr  # one grid per fold, each to its end


def test_a_benchmark_cell_prints_no_probe_progress(tmp_path: Path, capfd: pytest.CaptureFixture) -> None:
    """The benchmark's cells run `Protocol.run` under the benchmark's own bar: no probe lines inside."""
    store = make_store(tmp_path / "store", n_videos=9)
    tools = make_tool_store(tmp_path / "tools")
    config = BenchmarkConfig(
        models="plstitch-tiny-synthetic",
        datasets="synthetic",
        out=tmp_path / "bench",
        protocols=("linear", "linear-tools", "cv"),
        linear=LinearConfig(epochs=2, device="cpu"),
        cv_protocol="linear",
        cv_folds=3,
    )
    for protocol, root in (("linear", store.root), ("cv", store.root), ("linear-tools", tools.root)):
        results = get_protocol(protocol).run(root, config, None)
        assert results["metrics"], protocol
    said = capfd.readouterr().err
    assert not progress_lines(said, PHASE_LINE) and not progress_lines(said, TOOL_LINE), said
    assert "heads)" not in said, said


# ------------------------------------------------------------------------------ no validation videos


def test_one_training_video_without_val_says_how_to_record_one(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", n_videos=3, with_val=False)  # train: vid00; test: vid01, vid02
    line = one_error(invoke("linear", "--features", store.root, "--epochs", 2, "--device", "cpu"))
    assert "records 1 training video and no 'val' split" in line, line
    assert "the linear probe chooses its head" in line, line
    assert f'record a val split: in {store.root / "manifest.json"}, move some videos from the "train"' in line
    assert '"val": ["<video>", ...]' in line, line


@pytest.mark.parametrize(("fraction", "held"), [("0", "none"), ("1", "all")])
def test_val_fraction_0_or_1_without_val_is_refused_naming_the_flag(
    tmp_path: Path, fraction: str, held: str
) -> None:
    store = make_store(tmp_path / "store", with_val=False)  # six training videos, no val split
    line = one_error(invoke("linear", "--features", store.root, "--val-fraction", fraction, "--epochs", 2))
    assert f"--val-fraction {fraction} would hold out {held} of the 6 training videos" in line, line
    assert "pass --val-fraction between 0 and 1" in line and "record a val split: in " in line, line


def test_a_recorded_val_split_needs_no_val_fraction(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store")  # with a val split: --val-fraction is not used
    result = invoke("-q", "linear", "-f", store.root, "--val-fraction", 0, "--epochs", 2, "--json", "-")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["protocol"]["validation"] == "official"


def test_another_scheme_with_val_videos_is_offered(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", n_videos=3, with_val=False)
    manifest = json.loads((store.root / "manifest.json").read_text())
    manifest["split_schemes"] = {
        "one": manifest["splits"],
        "withval": {"train": ["vid00"], "val": ["vid01"], "test": ["vid02"]},
    }
    (store.root / "manifest.json").write_text(json.dumps(manifest))
    line = one_error(invoke("linear", "--features", store.root, "--split-scheme", "one", "--epochs", 2))
    assert "pass --split-scheme withval (recorded with val videos: withval)" in line, line


def test_the_tool_probe_says_how_to_record_a_val_split(tmp_path: Path) -> None:
    one = make_tool_store(tmp_path / "one", n_videos=4)  # one training video, three test videos
    line = one_error(invoke("linear", "-f", one.root, "--task", "tools", "--epochs", 2))
    assert "records 1 training video and no 'val' split, and the tool probe chooses its head" in line, line
    assert "record a val split: in " in line, line
    several = make_tool_store(tmp_path / "several")
    line = one_error(invoke("linear", "-f", several.root, "--task", "tools", "--val-fraction", 0))
    assert "--val-fraction 0 would hold out none of the 6 training videos" in line, line


def test_a_cv_fold_left_one_training_video_is_one_line(tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", n_videos=3)
    line = one_error(invoke("cv", "--features", store.root, "--protocol", "linear", "--folds", 2))
    assert "CV fold 0 trains on 1 video" in line and "--protocol knn" in line, line
