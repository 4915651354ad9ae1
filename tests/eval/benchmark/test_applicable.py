"""n/a cells (`benchmark/applicable.py`): a benchmark over a dataset with triplet labels (synthetic-triplets)
and one without them nor phases (a JIGSAWS stand-in) with `--tasks phases,triplets,skill` runs what each
dataset has labels for; the rest is n/a in the table, its JSON and the closing line, not failed (exit 0);
a rerun keeps them n/a and runs nothing; a pair with only n/a cells is not even extracted; skill's cv
cells with `--skill-folds louo` hold out one JIGSAWS user per fold."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import plstitch_eval.benchmark.tasks as bench_tasks
from plstitch_eval.benchmark import applicable
from plstitch_eval.benchmark import runner as bench_runner
from plstitch_eval.benchmark.applicable import cell_task, mark_unlabelled, na_line, unlabelled
from plstitch_eval.benchmark.cells import NA, cell_settings, plan_cells
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.protocols.skill import run_skill_cv
from plstitch_eval.tasks import MULTI_LABEL, Task
from tests.eval.benchmark.conftest import SMALL_DATASET, cli_args, runner, table_json
from tests.eval.data.stand_ins import write_jigsaws

TINY = "plstitch-tiny-synthetic"
USERS = "BCDE"  # two Suturing trials each (001: loso-1's test split), 2-4 s at 30 fps: 2-4 frames at 1 fps
JIGSAWS = {
    "Suturing": {
        f"Suturing_{user}{trial:03d}": (
            "N",
            tuple((i + trial + k) % 5 + 1 for i in range(6)),
            60 + 30 * ((k + trial) % 3),
        )
        for k, user in enumerate(USERS)
        for trial in (1, 2)
    }
}


def write_datasets(folder: Path, names: tuple[str, ...] = ("synthetic-triplets", "jigsaws")) -> str:
    """A datasets file of the small synthetic-triplets set and a JIGSAWS stand-in (no phases, no triplets)."""
    write_jigsaws(folder / "jigsaws-data", JIGSAWS)
    tables = {
        "synthetic-triplets": "[synthetic-triplets]\n"
        + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()),
        "jigsaws": '[jigsaws]\nroot = "jigsaws-data"\n',
    }
    path = folder / "datasets.toml"
    path.write_text("\n".join(tables[name] for name in names), encoding="utf-8")
    return str(path)


ARGS = ["--tasks", "phases,triplets,skill", "--skill-folds", "louo"]


@pytest.fixture(scope="module")
def run(cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny model x (synthetic-triplets, JIGSAWS stand-in) x linear, cv x phases, triplets, skill."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(cache))
    try:
        folder = tmp_path_factory.mktemp("bench-na")
        out = folder / "out"
        args = [*cli_args(out, write_datasets(folder), models=TINY, protocols="linear,cv"), *ARGS]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        yield out, args, result
    finally:
        mp.undo()


def _statuses(table: dict) -> dict[tuple, str]:
    phases = {(c["dataset"], "phases", c["protocol"]): c["status"] for c in table["cells"]}
    tasks = {(c["dataset"], c["task"], c["protocol"]): c["status"] for c in table["tasks"]["cells"]}
    return {**phases, **tasks}


def test_cells_without_labels_are_na_not_failed(run) -> None:
    out, _, result = run
    table = table_json(out)
    assert _statuses(table) == {
        ("synthetic-triplets", "phases", "linear"): "done",
        ("synthetic-triplets", "phases", "cv"): "done",
        ("jigsaws", "phases", "linear"): NA,
        ("jigsaws", "phases", "cv"): NA,
        ("synthetic-triplets", "triplets", "linear"): "done",
        ("synthetic-triplets", "triplets", "cv"): "done",
        ("jigsaws", "triplets", "linear"): NA,
        ("jigsaws", "triplets", "cv"): NA,
        ("synthetic-triplets", "skill", "linear"): NA,
        ("synthetic-triplets", "skill", "cv"): NA,
        ("jigsaws", "skill", "linear"): "done",
        ("jigsaws", "skill", "cv"): "done",
    }
    assert table["ok"] and table["failed"] == [] and table["tasks"]["failed"] == []
    reasons = {
        (r["dataset"], r.get("task", "phases"), r["protocol"]): r["reason"] for r in table["not_applicable"]
    }
    assert len(reasons) == 6
    assert reasons[("jigsaws", "triplets", "linear")].startswith("jigsaws has no triplets labels")
    assert "triplet_names" in reasons[("jigsaws", "triplets", "linear")]
    assert reasons[("jigsaws", "phases", "cv")].startswith("jigsaws has no phases labels")
    assert "skill" in reasons[("synthetic-triplets", "skill", "cv")]
    for record in [*table["cells"], *table["tasks"]["cells"]]:
        assert (record["status"] == NA) == (record["reason"] is not None)
        assert record["error"] is None and (record["results"] is None) == (record["status"] == NA)
    markdown = (out / "table.md").read_text(encoding="utf-8")
    phase_row = next(line for line in markdown.splitlines() if line.startswith(f"| {TINY} |"))
    assert phase_row.count("| n/a ") == sum(c["dataset"] == "jigsaws" for c in table["columns"]) > 0
    assert "n/a - no triplets labels in: jigsaws (linear, CV linear)." in markdown
    assert "n/a - no skill labels in: synthetic-triplets (linear, CV linear)." in markdown
    assert "**jigsaws, linear** (`linear-triplets`)" not in markdown  # no table of n/a
    assert "Failed" not in markdown
    lines = result.stderr.splitlines()
    (closing,) = [line for line in lines if "cells n/a:" in line]
    assert closing.startswith("6 cells n/a: jigsaws has no phases labels (2)")
    assert (
        "jigsaws has no triplets labels (2)" in closing
        and "synthetic-triplets has no skill labels (2)" in closing
    )
    assert sum(" n/a " in line and line.startswith("[") for line in lines) == 6


def test_skill_cv_with_louo_holds_out_one_user_per_fold(run) -> None:
    out, _, result = run
    block = table_json(out)["tasks"]
    (cv,) = [
        c for c in block["cells"] if (c["dataset"], c["task"], c["protocol"]) == ("jigsaws", "skill", "cv")
    ]
    assert cv["seed"] is None  # the folds come from the trial names: no seed, one cell
    results = json.loads(Path(cv["results"]).read_text(encoding="utf-8"))
    assert [f["fold"] for f in results["folds"]] == [f"louo-{u}" for u in USERS]
    for fold in results["folds"]:
        user = fold["fold"][-1]
        assert sorted(fold["test"]) == [f"Suturing_{user}001", f"Suturing_{user}002"]
    assert results["benchmark"]["settings"]["skill"]["folds"] == "louo"
    assert results["benchmark"]["settings"]["skill"]["seed"] is None
    alone = run_skill_cv(cv["features"], "louo")
    assert alone["metrics"] == results["metrics"] and alone["predictions"] == results["predictions"]
    assert block["skill_folds"] == "louo"
    assert "leave-one-user-out folds" in (out / "table.md").read_text(encoding="utf-8")
    assert "| skill | cv: spearman_rho " in result.stderr


def test_a_rerun_keeps_na_cells_and_runs_nothing(run, monkeypatch: pytest.MonkeyPatch) -> None:
    out, args, _ = run

    def forbidden(*_args, **_kwargs):
        raise AssertionError("a finished or n/a cell was run again")

    for name in ("load_encoder", "extract_many", "get_protocol"):
        monkeypatch.setattr(bench_runner, name, forbidden)
    for name in ("run_multilabel_linear", "run_multilabel_cv", "run_skill_linear", "run_skill_cv"):
        monkeypatch.setattr(bench_tasks, name, forbidden)
    files = sorted((out / "results").rglob("*.json"))
    before = {p: p.stat().st_mtime_ns for p in files}
    statuses = _statuses(table_json(out))
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert {p: p.stat().st_mtime_ns for p in sorted((out / "results").rglob("*.json"))} == before
    table = table_json(out)
    assert _statuses(table) == statuses and len(table["not_applicable"]) == 6
    assert all(c["resumed"] for c in [*table["cells"], *table["tasks"]["cells"]] if c["status"] == "done")
    assert "6 cells n/a:" in again.stderr


def test_a_pair_with_only_na_cells_is_not_extracted(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--tasks triplets` on the JIGSAWS stand-in: n/a from what the adapter says, before any extraction."""

    def forbidden(*_args, **_kwargs):
        raise AssertionError("extracted a store only n/a cells need")

    for name in ("load_encoder", "extract_many"):
        monkeypatch.setattr(bench_runner, name, forbidden)
    out = tmp_path / "out"
    datasets = write_datasets(tmp_path, ("jigsaws",))
    result = runner.invoke(
        app, [*cli_args(out, datasets, models=TINY, protocols="linear"), "--tasks", "triplets"]
    )
    assert result.exit_code == 0, result.output
    (record,) = table_json(out)["tasks"]["cells"]
    assert record["status"] == NA and "its dataset records no triplet_names" in record["reason"]
    assert not (out / "features").exists()
    assert "1 cell n/a: jigsaws has no triplets labels (1)" in result.stderr


def test_which_task_a_cell_reads_and_why_it_is_na(tmp_path: Path) -> None:
    config = BenchmarkConfig(
        TINY, "synthetic", tmp_path / "out", protocols="knn,linear-tools,linear", tasks="phases,cvs,rsd"
    )
    cells = plan_cells(config)
    assert [(c.task, c.protocol, cell_task(c).name) for c in cells] == [
        ("phases", "knn", "phases"),
        ("phases", "linear-tools", "tools"),
        ("phases", "linear", "phases"),
        ("cvs", "linear", "cvs"),
        ("rsd", "knn", "rsd"),
        ("rsd", "linear", "rsd"),
    ]
    manifest = {"class_names": ["a", "b"], "tool_names": [], "cvs_names": ["C1"]}
    assert [unlabelled(c, manifest) is None for c in cells] == [True, False, True, True, True, True]
    assert unlabelled(cells[1], manifest) == "synthetic has no tools labels (its store records no tool_names)"
    assert unlabelled(cells[3], {}) == "synthetic has no cvs labels (its store records no cvs_names)"
    marked = mark_unlabelled(cells, lambda: {"class_names": [], "tool_names": ["t"]})  # no store yet
    assert [c.protocol for c in marked] == ["knn", "linear", "linear"] and cells[1].status == "pending"
    assert cells[0].reason == "synthetic has no phases labels (its dataset records no class_names)"
    assert (
        na_line(cells) == "3 cells n/a: synthetic has no phases labels (2), synthetic has no cvs labels (1)"
    )
    assert na_line(cells[4:]) is None


def test_a_task_needing_a_key_no_adapter_says_waits_for_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plugin task whose labels are a manifest key of its own: the adapter cannot say, its store can."""
    config = BenchmarkConfig(TINY, "synthetic", tmp_path / "out", protocols="linear", tasks="cvs")
    (cell,) = plan_cells(config)
    plugin = Task("gaze", "where the surgeon looks", MULTI_LABEL, "gaze", ("mAP",), "mAP", ("linear",),
                  needs=("gaze_names",))  # fmt: skip
    assert plugin.label_keys == ("gaze_names",) and not plugin.has_labels({"gaze_names": []})
    assert plugin.has_labels({"gaze_names": ["left"]})
    monkeypatch.setattr(applicable, "cell_task", lambda _cell: plugin)
    assert unlabelled(cell, {}, "dataset") is None
    assert unlabelled(cell, {}) == "synthetic has no gaze labels (its store records no gaze_names)"


def test_skill_folds_setting(tmp_path: Path) -> None:
    def config(**options) -> BenchmarkConfig:
        return BenchmarkConfig(TINY, "synthetic", tmp_path / "out", tasks="skill", protocols="cv", **options)

    louo, five = config(skill_folds="LOUO"), config(cv_folds=5, seeds="0,1")
    assert (louo.skill_folds, five.skill_folds, config(skill_folds=3).skill_folds) == ("louo", "5", "3")
    assert [c.seed for c in plan_cells(louo)] == [None] and [c.seed for c in plan_cells(five)] == [0, 1]
    louo_cell, five_cell = plan_cells(louo)[0], plan_cells(five)[0]
    assert cell_settings(louo, louo_cell)["skill"]["folds"] == "louo"
    assert (cell_settings(five, five_cell)["skill"]["folds"], five_cell.seed) == ("5", 0)
    assert cell_settings(louo, louo_cell) != cell_settings(config(cv_folds=5), five_cell)
    bad_options = [({"skill_folds": "loo"}, "--skill-folds must be louo"), ({"skill_folds": 1}, ">= 2")]
    bad_options.append(({"skill_folds": "louo", "seeds": "0,1"}, "--seeds"))  # louo has no seed
    for bad, message in bad_options:
        with pytest.raises(ConfigError, match=message):
            config(**bad)
    with pytest.raises(ConfigError, match="add skill to --tasks and cv to --protocols"):
        BenchmarkConfig(
            TINY, "synthetic", tmp_path / "out", tasks="skill", protocols="linear", skill_folds="louo"
        )
