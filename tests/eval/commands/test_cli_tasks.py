"""`plstitch tasks` and `--task` on knn / linear through Typer's test runner: the listing (text and JSON), the
one-line refusals of a bad task or option, a regression run's results file, and `--task phases` writing what
`linear` wrote before tasks existed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.store.features import FeatureStore
from tests.eval.protocols.stores import write_store

runner = CliRunner()
SHIPPED = {"phases": "multi-class", "tools": "multi-label", "anticipation": "regression", "rsd": "regression"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    return write_store(tmp_path_factory.mktemp("cli-tasks") / "store")


def invoke(*args: object):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def refused(*args: object) -> str:
    """The one error line of a refused command (exit 1, nothing on stdout, no traceback)."""
    result = runner.invoke(app, [str(a) for a in args])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert result.stdout == ""
    return lines[0]


def test_tasks_lists_the_four_tasks_with_their_heads() -> None:
    text = invoke("tasks").stdout
    for name, head in SHIPPED.items():
        block = text.split(f"\n{name}: ", 1)[1].split("\n\n", 1)[0]
        assert f"head: {head}" in block, block
    assert [text.index(f"\n{name}: ") for name in SHIPPED] == sorted(text.index(f"\n{n}: ") for n in SHIPPED)
    assert "knn (knn-rsd), linear (linear-rsd)" in text
    assert "--horizon MINUTES" in text.split("\nanticipation: ", 1)[1].split("\n\n", 1)[0]

    rows = json.loads(invoke("tasks", "--json", "-").stdout)["tasks"]
    assert [(row["name"], row["head"]) for row in rows[:4]] == list(SHIPPED.items())
    assert {row["package"] for row in rows[:4]} == {"plstitch"}
    by_name = {row["name"]: row for row in rows}
    assert by_name["tools"]["protocols"] == ["linear", "temporal"]
    assert by_name["tools"]["results_tasks"] == {"linear": "linear-tools", "temporal": "temporal-tools"}
    assert by_name["anticipation"]["horizon"] and not by_name["rsd"]["horizon"]
    assert by_name["rsd"]["metrics"][0] == "MAE"


def test_tasks_json_file(tmp_path: Path) -> None:
    out = tmp_path / "tasks.json"
    invoke("tasks", "--json", out)
    assert [row["name"] for row in json.loads(out.read_text(encoding="utf-8"))["tasks"]][:4] == list(SHIPPED)


@pytest.mark.parametrize("horizon", ["0", "-1", "nan"])
def test_a_horizon_not_above_zero_is_one_line_naming_it(store, horizon: str) -> None:
    line = refused("linear", "--features", store.root, "--task", "anticipation", "--horizon", horizon)
    assert line.startswith("error: --horizon must be")


def test_a_misspelt_task_gets_a_close_match(store) -> None:
    line = refused("linear", "--features", store.root, "--task", "anticpation")
    assert "Did you mean 'anticipation'?" in line
    assert "Did you mean 'rsd'?" in refused("knn", "--features", store.root, "--task", "rds")


def test_options_of_another_task_are_refused_in_one_line(store, tmp_path: Path) -> None:
    line = refused("linear", "--features", store.root, "--task", "phases", "--horizon", "2")
    assert "--horizon" in line and "regression task" in line
    line = refused("linear", "--features", store.root, "--horizon", "2")  # phases by default
    assert "--horizon" in line
    line = refused("linear", "--features", store.root, "--task", "rsd", "--anticipate", "phases")
    assert "--task rsd takes neither" in line
    line = refused("linear", "--features", store.root, "--task", "rsd", "--relaxed")
    assert line.startswith("error: --relaxed: not with --task rsd")
    line = refused(  # a regression probe is saved (test_regression_probe.py), but not from a training subset
        "linear",
        "--features",
        store.root,
        "--task",
        "rsd",
        "--train-fraction",
        "0.5",
        "--save",
        tmp_path / "p",
    )
    assert "--save" in line and not (tmp_path / "p").exists()
    line = refused("knn", "--features", store.root, "--task", "tools")
    assert "knn takes --task phases, anticipation, rsd" in line
    line = refused("knn", "--features", store.root, "--task", "rsd", "--k", "5", "--k", "10")
    assert "--k" in line


def test_knn_has_no_elapsed_option(store) -> None:
    result = runner.invoke(app, ["knn", "--features", str(store.root), "--task", "rsd", "--elapsed"])
    assert result.exit_code == 2 and "No such option: --elapsed" in result.output


def test_knn_rsd_writes_its_results_with_the_references(store, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = invoke("knn", "--features", store.root, "--task", "rsd", "--k", "5", "--json", out)
    assert "rsd (knn, k=5; minutes)" in " ".join(result.stdout.split()) and "naive" in result.stdout
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["task"] == results["protocol"]["name"] == "knn-rsd"
    assert results["protocol"]["task"] == "rsd" and results["protocol"]["k_used"] == 5
    assert results["headline_metrics"] == ["MAE", "MAE_last_2min", "MAE_last_5min"]
    assert set(results["references"]) == {"naive", "elapsed-mean"}
    for reference in results["references"].values():
        assert set(reference["metrics"]) == set(results["metrics"])
        assert set(reference["per_video"]) == set(store.splits()["test"])
    assert sorted(results["predictions"]) == store.splits()["test"]
    assert all(len(results["predictions"][v]) == len(store.read(v).labels) for v in store.splits()["test"])


def test_linear_anticipation_runs_with_a_horizon(store, tmp_path: Path) -> None:
    out = tmp_path / "a.json"
    args = ("--task", "anticipation", "--horizon", "0.5", "--anticipate", "phases", "--epochs", "2")
    result = invoke("linear", "--features", store.root, *args, "--device", "cpu", "--json", out)
    assert "horizon 0.5 min" in " ".join(result.stdout.split())  # the table's title, wrapped or not
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["task"] == "linear-anticipation"
    assert results["protocol"]["horizon_min"] == 0.5 and results["protocol"]["anticipate"] == "phases"
    assert results["protocol"]["outputs"] == store.manifest["class_names"]
    values = [x for rows in results["predictions"].values() for row in rows for x in row]
    assert min(values) >= 0 and max(values) <= 0.5


def _without_created(text: str) -> str:
    stripped, count = re.subn(r'\n\s*"created": "[^"]*",?', "", text)
    assert count == 1
    return stripped


def test_linear_task_phases_writes_what_linear_wrote(store, tmp_path: Path) -> None:
    args = ("--features", store.root, "--epochs", "3", "--lr", "0.1", "--lr", "0.01", "--device", "cpu")
    default = invoke("linear", *args, "--json", tmp_path / "default.json")
    phases = invoke("linear", *args, "--task", "phases", "--json", tmp_path / "phases.json")
    before = (tmp_path / "default.json").read_text(encoding="utf-8")
    after = (tmp_path / "phases.json").read_text(encoding="utf-8")
    assert _without_created(after) == _without_created(before)
    results = json.loads(after)
    assert results["task"] == "linear" and "accuracy" in results["metrics"]
    assert "references" not in results and "horizon_min" not in results["protocol"]
    assert phases.stdout == default.stdout
