"""`plstitch benchmark --executor slurm` through a real one-node Slurm started on this machine
(`slurm_cluster.py`; the Slurm tests skip, saying why, where it cannot start, or without submitit).

A 2 x 2 matrix - two tiny models x k-NN and linear on a small synthetic set, on CPU - run as Slurm jobs gives
the table.md and table.json of `--executor local`, one job per cell with its log named by the cell; a running
cell's job requeued with `scontrol requeue` runs again and finishes with the same results; a cancelled job is
`failed` in `--status` and a rerun submits that cell again (and nothing else). Without submitit,
`--executor slurm` and `--status` are one line naming the extra.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from plstitch_eval.cli import app
from tests.eval.benchmark.conftest import cli_args, runner, table_json
from tests.eval.benchmark.slurm_cluster import SlurmCluster, module_slurm

DATASETS_TOML = "[synthetic]\nn_videos = 6\nmin_seconds = 8.0\nmax_seconds = 12.0\n"
SLURM_TOML = "[slurm]\npoll_seconds = 0.5\ntime = 10\n"  # the [slurm] table of --config
LINEAR = "plstitch-tiny-synthetic/synthetic/linear"  # the cell requeued
RANDOM_KNN = "random-init_plstitch-tiny-synthetic/synthetic/knn"  # the cell cancelled
RUN_ONLY = {"features", "results", "seconds", "resumed"}  # a cell's fields that name its run, not its numbers


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    """A one-node Slurm for this module (`SLURM_CONF` set), stopped after."""
    with module_slurm(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A datasets file (the small synthetic set) and a config file with a [slurm] table."""
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "datasets.toml").write_text(DATASETS_TOML, encoding="utf-8")
    (folder / "config.toml").write_text(SLURM_TOML, encoding="utf-8")
    return folder


def slurm_args(out: Path, inputs: Path, *extra: str) -> list[str]:
    args = cli_args(out, str(inputs / "datasets.toml"))
    return [*args, "--executor", "slurm", "--config", str(inputs / "config.toml"), *extra]


@pytest.fixture(scope="module")
def matrix(slurm: SlurmCluster, inputs: Path, cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """The 2 x 2 benchmark run here (`--executor local`) and as Slurm jobs (`--wait`): both outs, the
    Slurm run's CLI result."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(cache))
    try:
        root = tmp_path_factory.mktemp("matrix")
        local = runner.invoke(app, cli_args(root / "local", str(inputs / "datasets.toml")))
        assert local.exit_code == 0, local.output
        on_slurm = runner.invoke(app, slurm_args(root / "slurm", inputs, "--wait"))
        assert on_slurm.exit_code == 0, on_slurm.output
        yield root / "local", root / "slurm", on_slurm
    finally:
        mp.undo()


def comparable(table: dict[str, Any]) -> dict[str, Any]:
    """A table.json without what names its run (its folder, files, timings, resumed)."""
    cells = [{k: v for k, v in cell.items() if k not in RUN_ONLY} for cell in table["cells"]]
    return {**{k: v for k, v in table.items() if k != "out"}, "cells": cells}


def records(out: Path) -> dict[str, Any]:
    return json.loads((out / "slurm" / "jobs.json").read_text(encoding="utf-8"))["cells"]


def status(out: Path) -> dict[str, Any]:
    """`--status` of `out`: its JSON report (stdout); the table went to stderr."""
    result = runner.invoke(app, ["benchmark", "--out", str(out), "--status"])
    assert result.exit_code == 0, result.output
    assert "status" in result.stderr and "cell(s):" in result.stderr
    return {cell["key"]: cell for cell in json.loads(result.stdout)["cells"]}


def wait_for_text(path: Path, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(encoding="utf-8", errors="replace"):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{text!r} not in {path} after {timeout} s")


@pytest.mark.slow
def test_a_2x2_matrix_as_slurm_jobs_gives_the_local_table(matrix, inputs: Path) -> None:
    local, out, result = matrix
    assert (out / "table.md").read_text(encoding="utf-8") == (local / "table.md").read_text(encoding="utf-8")
    assert comparable(table_json(out)) == comparable(table_json(local))
    assert table_json(out)["ok"] and len(table_json(out)["cells"]) == 4
    # one job per cell, the four as one job array, each cell's log linked by its name in slurm/logs/
    assert "submitted 4 cell(s) as job array" in result.stderr
    jobs = records(out)
    assert len({r["job_id"] for r in jobs.values()}) == 4
    assert len({r["job_id"].split("_")[0] for r in jobs.values()}) == 1
    logs = sorted(path.name for path in (out / "slurm" / "logs").glob("*.out"))
    assert logs == sorted(f"{key.replace('/', '__')}.out" for key in jobs)
    for key, record in jobs.items():  # the job's own log (its cell's done file may come before its end)
        assert f"job_id={record['job_id']}" in (out / record["log"]).read_text(encoding="utf-8"), key
    assert {cell["status"] for cell in status(out).values()} == {"done"}
    # every cell done: a rerun submits nothing and writes the same table
    rerun = runner.invoke(app, slurm_args(out, inputs))
    assert rerun.exit_code == 0, rerun.output
    assert "submitted" not in rerun.stderr
    assert (out / "table.md").read_text(encoding="utf-8") == (local / "table.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_requeued_job_finishes_the_cell_with_the_same_result(
    matrix, slurm: SlurmCluster, inputs: Path
) -> None:
    local, out, _ = matrix
    results = out / "results" / f"{LINEAR}.json"
    before = json.loads(results.read_text(encoding="utf-8"))
    results.unlink()
    submitted = runner.invoke(app, slurm_args(out, inputs))
    assert submitted.exit_code == 0, submitted.output
    assert "submitted 1 cell(s)" in submitted.stderr and "rerun the same command" in submitted.stderr
    job_id = records(out)[LINEAR]["job_id"]
    log = out / records(out)[LINEAR]["log"]
    slurm.wait_for(job_id, {"RUNNING"})
    wait_for_text(log, "Starting with")  # the job's Python has started on the cell
    slurm.run("scontrol", "requeue", job_id)
    assert status(out)[LINEAR]["status"] in ("queued", "running")
    finished = runner.invoke(app, [*slurm_args(out, inputs), "--wait"])
    assert finished.exit_code == 0, finished.output
    assert "submitted" not in finished.stderr  # the requeued job finished the cell: nothing resubmitted
    assert records(out)[LINEAR]["job_id"] == job_id
    assert log.read_text(encoding="utf-8").count("Starting with") == 2  # the same job ran the cell again
    after = json.loads(results.read_text(encoding="utf-8"))
    assert after["metrics"] == before["metrics"] and after["benchmark"] == before["benchmark"]
    assert (out / "table.md").read_text(encoding="utf-8") == (local / "table.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_cancelled_job_is_failed_in_status_and_a_rerun_submits_it_again(
    matrix, slurm: SlurmCluster, inputs: Path
) -> None:
    local, out, _ = matrix
    (out / "results" / f"{RANDOM_KNN}.json").unlink()
    submitted = runner.invoke(app, slurm_args(out, inputs))
    assert submitted.exit_code == 0, submitted.output
    job_id = records(out)[RANDOM_KNN]["job_id"]
    slurm.run("scancel", job_id)
    slurm.wait_for(job_id, {"CANCELLED"})
    cell = status(out)[RANDOM_KNN]
    assert cell["status"] == "failed" and cell["slurm_state"].startswith("CANCELLED")
    assert "CANCELLED" in cell["error"] and cell["job_id"] == job_id
    assert {c["status"] for key, c in status(out).items() if key != RANDOM_KNN} == {"done"}
    finished = runner.invoke(app, [*slurm_args(out, inputs), "--wait"])
    assert finished.exit_code == 0, finished.output
    assert "submitted 1 cell(s)" in finished.stderr  # the cancelled cell only
    record = records(out)[RANDOM_KNN]
    assert record["job_id"] != job_id and record["earlier_jobs"][-1] == job_id
    assert status(out)[RANDOM_KNN]["status"] == "done"
    assert (out / "table.md").read_text(encoding="utf-8") == (local / "table.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_cells_without_labels_are_na_as_slurm_jobs(slurm: SlurmCluster, inputs: Path, tmp_path: Path) -> None:
    """`--tasks cvs` on synthetic (no CVS ratings): the cell's job finds it n/a and writes no results nor
    store, the table says n/a from what the dataset's adapter says, exit 0; a rerun submits nothing."""
    out = tmp_path / "out"
    args = cli_args(out, str(inputs / "datasets.toml"), models="plstitch-tiny-synthetic", protocols="linear")
    args += ["--executor", "slurm", "--config", str(inputs / "config.toml"), "--tasks", "cvs", "--wait"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "submitted 1 cell(s)" in result.stderr and not (out / "features").exists()
    table = table_json(out)
    assert table["ok"] and [c["status"] for c in table["tasks"]["cells"]] == ["n/a"]
    (na,) = table["not_applicable"]
    assert na["reason"] == "synthetic has no cvs labels (its dataset records no cvs_names)"
    assert "1 cell n/a: synthetic has no cvs labels (1)" in result.stderr
    (cell,) = status(out).values()  # --status says n/a too, with why, not failed
    assert cell["status"] == "n/a" and "no cvs labels" in cell["error"]
    rerun = runner.invoke(app, args)
    assert rerun.exit_code == 0, rerun.output
    assert "submitted" not in rerun.stderr and table_json(out)["not_applicable"] == [na]


def test_a_job_sbatch_refuses_is_one_line(slurm: SlurmCluster, inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = runner.invoke(app, slurm_args(out, inputs, "--slurm-partition", "nosuch"))
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: sbatch refused the jobs: ")
    assert "partition" in lines[0].lower() and "Traceback" not in result.output
    assert not (out / "slurm" / "jobs.json").exists()


def test_without_submitit_executor_slurm_and_status_are_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "submitit", None)  # `import submitit` raises ImportError
    out = tmp_path / "out"
    submit = [*cli_args(out, "synthetic"), "--executor", "slurm"]
    for args in (submit, ["benchmark", "--out", str(out), "--status"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, result.output
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines == ["error: --executor slurm needs submitit: pip install 'plstitch[slurm]'"]
        assert "Traceback" not in result.output and not out.exists()
