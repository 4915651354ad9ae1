"""`plstitch benchmark --tasks phases,anticipation,rsd`: a cell per (model, dataset, task, protocol, seed),
each equal to the single command; the task sections' mean ± std and paired per-video differences recomputed
here from the cells' results files; reruns recompute nothing; `--tasks phases` is the run without `--tasks`;
bad inputs are one line; a cell whose labels the dataset lacks fails alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import t as student_t

import plstitch_eval.benchmark.tasks as bench_tasks
from plstitch_eval.benchmark import runner as bench_runner
from plstitch_eval.benchmark.cells import cell_settings, cell_state, plan_cells
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.cli import app
from plstitch_eval.linear_grid import LinearConfig
from tests.eval.benchmark.conftest import EPOCHS, MODELS, SMALL_DATASET, cli_args, runner, table_json

TASKS = ("anticipation", "rsd")
HORIZON = "0.5"  # the synthetic videos last about a minute
TASK_ARGS = ["--tasks", "phases,anticipation,rsd", "--horizon", HORIZON, "--seeds", "0,1"]


def small_datasets(folder: Path) -> str:
    path = folder / "small.toml"
    path.write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    return str(path)


@pytest.fixture(scope="module")
def run(cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """Two tiny models x the small synthetic set x k-NN + linear x phases, anticipation, rsd; 2 seeds."""
    mp = pytest.MonkeyPatch()
    mp.setenv("PLSTITCH_CACHE", str(cache))
    try:
        folder = tmp_path_factory.mktemp("bench-tasks")
        out = folder / "out"
        args = [*cli_args(out, small_datasets(folder)), *TASK_ARGS]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        yield out, args, result
    finally:
        mp.undo()


def _results(record: dict) -> dict:
    return json.loads(Path(record["results"]).read_text(encoding="utf-8"))


def _cells(block: dict, section: dict, model: str) -> list[dict]:
    keys = ("task", "dataset", "protocol")
    return [
        c
        for c in block["cells"]
        if c["model"] == model and all(c[k] == section[k] for k in keys) and c["status"] == "done"
    ]


def test_a_cell_per_task_protocol_and_seed_and_a_section_per_task(run) -> None:
    out, _, result = run
    table = table_json(out)
    block = table["tasks"]
    assert table["ok"] and block["failed"] == [] and block["seeds"] == [0, 1]
    assert [c["protocol"] for c in table["cells"]] == ["knn", "linear"] * 2  # the phase cells as before
    expected = [
        (m, t, p, s)
        for m in MODELS.split(",")
        for t in TASKS
        for p, seeds in (("knn", [None]), ("linear", [0, 1]))
        for s in seeds
    ]
    assert [(c["model"], c["task"], c["protocol"], c["seed"]) for c in block["cells"]] == expected
    for record in block["cells"]:
        path = Path(record["results"])
        name = "knn.json" if record["seed"] is None else f"linear-seed{record['seed']}.json"
        assert (path.parent.name, path.name) == (record["task"], name)
        data = _results(record)
        assert data["task"] == f"{record['protocol']}-{record['task']}"
        mark = data["benchmark"]
        assert (mark["task"], mark["seed"]) == (record["task"], record["seed"])
        if record["task"] == "anticipation":
            assert mark["settings"]["task"]["horizon_min"] == 0.5
            assert data["protocol"]["horizon_min"] == 0.5
        else:
            assert "horizon_min" not in mark["settings"]["task"]
        if record["seed"] is not None:
            assert (
                data["protocol"]["seed"] == record["seed"]
                and mark["settings"]["linear"]["seed"] == record["seed"]
            )
    assert [(s["task"], s["protocol"]) for s in block["sections"]] == [
        (t, p) for t in TASKS for p in ("knn", "linear")
    ]
    markdown = (out / "table.md").read_text(encoding="utf-8")
    assert "## Task: anticipation" in markdown and "## Task: rsd" in markdown
    assert markdown.index("| Model | synthetic k-NN Acc") < markdown.index("## Task: anticipation")
    assert "| reference: naive |" in markdown and "| reference: elapsed-mean |" in markdown
    assert markdown in result.stdout and "tasks figure:" in result.stderr
    assert block["figure"] == "tasks.png" and (out / "tasks.png").stat().st_size > 10_000
    rsd = next(s for s in block["sections"] if s["task"] == "rsd")
    assert rsd["metrics"] == ["MAE", "MAE_last_2min", "MAE_last_5min"] and rsd["paired_metrics"] == ["MAE"]
    anticipation = next(s for s in block["sections"] if s["task"] == "anticipation")
    assert anticipation["metrics"][0] == "phase_wMAE" and anticipation["paired_metrics"] == [
        "phase_wMAE",
        "tool_wMAE",
    ]


def test_the_linear_task_cells_equal_the_single_command(run, tmp_path: Path) -> None:
    out, _, _ = run
    block = table_json(out)["tasks"]
    first = MODELS.split(",")[0]
    for i, record in enumerate(
        c for c in block["cells"] if c["model"] == first and c["protocol"] == "linear"
    ):
        single = tmp_path / f"{i}.json"
        horizon = ["--horizon", HORIZON] if record["task"] == "anticipation" else []
        args = ["linear", "--features", record["features"], "--task", record["task"], *horizon]
        args += ["--seed", str(record["seed"]), "--epochs", EPOCHS, "--device", "cpu", "--json", str(single)]
        done = runner.invoke(app, args)
        assert done.exit_code == 0, done.output
        assert json.loads(single.read_text(encoding="utf-8"))["metrics"] == _results(record)["metrics"]


def test_rows_are_the_mean_and_std_over_the_seeds_of_the_cells(run) -> None:
    out, _, _ = run
    block = table_json(out)["tasks"]
    for section in block["sections"]:
        rows = {r["row"]: r for r in section["rows"]}
        for model in MODELS.split(","):
            cells = [_results(c) for c in _cells(block, section, model)]
            assert len(cells) == (1 if section["protocol"] == "knn" else 2)
            for metric in section["metrics"]:
                values = [c["metrics"][metric] for c in cells]
                assert rows[model]["metrics"][metric] == pytest.approx(np.mean(values))
                std = rows[model]["metrics_std"][metric]
                assert std is None if len(values) == 1 else std == pytest.approx(np.std(values, ddof=1))
        first = [_results(c) for c in _cells(block, section, MODELS.split(",")[0])]
        names = list(first[0]["references"])
        assert [r["row"] for r in section["rows"] if r["kind"] == "reference"] == [
            f"reference: {n}" for n in names
        ]
        for name in names:
            values = [c["references"][name]["metrics"][section["metrics"][0]] for c in first]
            row = rows[f"reference: {name}"]
            assert row["metrics"][section["metrics"][0]] == pytest.approx(np.mean(values))


def _video_means(cells: list[dict], metric: str, reference: str | None = None) -> dict[str, float]:
    """Each video's metric averaged over the cells (seeds), recomputed from the per-video blocks."""
    found: dict[str, list[float]] = {}
    for cell in cells:
        per_video = cell["per_video"] if reference is None else cell["references"][reference]["per_video"]
        for video, values in per_video.items():
            if values.get(metric) is not None:
                found.setdefault(video, []).append(values[metric])
    return {video: float(np.mean(v)) for video, v in found.items()}


def _expected(a: dict[str, float], b: dict[str, float]) -> tuple[float, float, float, int]:
    videos = sorted(set(a) & set(b))
    d = np.array([a[v] - b[v] for v in videos])
    half = student_t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half), len(d)


def test_paired_differences_recomputed_from_the_cells_per_video_values(run) -> None:
    out, _, _ = run
    block = table_json(out)["tasks"]
    markdown = (out / "table.md").read_text(encoding="utf-8")
    first, second = MODELS.split(",")
    assert block["baseline"] == first and block["confidence"] == 0.95
    for section in block["sections"]:
        cells = {m: [_results(c) for c in _cells(block, section, m)] for m in (first, second)}
        found = {(d["a"], d["b"], d["metric"]): d for d in section["differences"]}
        for metric in section["paired_metrics"]:
            pairs = [
                ((first, second), _video_means(cells[first], metric), _video_means(cells[second], metric))
            ]
            for model in (first, second):
                for name in cells[model][0]["references"]:
                    refs = _video_means(cells[model], metric, reference=name)
                    pairs.append(((model, f"reference: {name}"), _video_means(cells[model], metric), refs))
            for (a, b), a_means, b_means in pairs:
                mean, low, high, n = _expected(a_means, b_means)
                d = found[(a, b, metric)]
                assert d["videos"] == n == 2 and d["mean"] == pytest.approx(mean)
                assert (d["ci_low"], d["ci_high"]) == (pytest.approx(low), pytest.approx(high))
                assert f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]" in markdown
        assert len(found) == len(section["paired_metrics"]) * (1 + 2 * len(cells[first][0]["references"]))


def test_a_rerun_recomputes_no_cell(run, monkeypatch: pytest.MonkeyPatch) -> None:
    out, args, _ = run
    files = sorted(p for p in (out / "results").rglob("*.json"))
    before = {p: p.stat().st_mtime_ns for p in files}

    def forbidden(*_args, **_kwargs):
        raise AssertionError("a finished cell was recomputed")

    for name in ("load_encoder", "extract_many"):
        monkeypatch.setattr(bench_runner, name, forbidden)
    for name in ("run_knn_regression", "run_regression_cv"):
        monkeypatch.setattr(bench_tasks, name, forbidden)
    monkeypatch.setitem(bench_tasks.VALIDATED, "linear", forbidden)
    again = runner.invoke(app, args)
    assert again.exit_code == 0, again.output
    assert {p: p.stat().st_mtime_ns for p in files} == before
    block = table_json(out)["tasks"]
    assert again.stderr.count("skipped") == 4 + len(block["cells"]) and all(
        c["resumed"] for c in block["cells"]
    )


def test_another_horizon_conflicts_with_the_anticipation_cells_only(run) -> None:
    out, _, _ = run
    config = BenchmarkConfig(
        MODELS,
        small_datasets(out.parent),
        out,
        linear=LinearConfig(epochs=int(EPOCHS)),
        tasks="anticipation,rsd",
        horizon=1.0,
        seeds="0,1",
    )
    states = {
        (c.task, c.protocol, c.seed): cell_state(c, cell_settings(config, c))[0] for c in plan_cells(config)
    }
    assert {s for (task, _, _), s in states.items() if task == "rsd"} == {"done"}
    assert {s for (task, _, _), s in states.items() if task == "anticipation"} == {"conflict"}


def _timeless(value: object) -> object:
    """A results JSON without what only the time of a run changes (the store's creation time, its digest)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in ("created", "store_sha256", "seconds")}
    return [_timeless(v) for v in value] if isinstance(value, list) else value


def test_tasks_phases_is_the_run_without_tasks(tmp_path: Path) -> None:
    datasets = small_datasets(tmp_path)
    outputs = {}
    for name, extra in (("plain", []), ("phases", ["--tasks", "phases"])):
        out = tmp_path / name
        args = cli_args(out, datasets, models="plstitch-tiny-synthetic", protocols="knn,linear")
        done = runner.invoke(app, [*args, *extra])
        assert done.exit_code == 0, done.output
        files = sorted(p for p in out.rglob("*.json") if "features" not in p.parts)
        outputs[name] = {
            "table.md": (out / "table.md").read_bytes(),
            "stdout": done.stdout,
            **{
                str(p.relative_to(out)): _timeless(json.loads(p.read_text().replace(str(out), "OUT")))
                for p in files
            },
        }
    assert outputs["phases"] == outputs["plain"]
    assert set(outputs["plain"]) == {
        "table.md",
        "stdout",
        "table.json",
        "results/plstitch-tiny-synthetic/synthetic/knn.json",
        "results/plstitch-tiny-synthetic/synthetic/linear.json",
    }
    assert "tasks" not in outputs["plain"]["table.json"] and not (tmp_path / "plain" / "tasks.png").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tasks", "nope"], "Unknown --tasks 'nope'"),
        (["--tasks", "rsd,antcipation"], "Did you mean 'anticipation'"),
        (["--tasks", "phases,tools", "--protocols", "knn"], "none of --protocols knn fits it"),
        (["--horizon", "2"], "add anticipation to --tasks"),
        (["--tasks", "anticipation", "--horizon", "0"], "--horizon must be above 0"),
        (["--tasks", "rsd", "--protocols", "linear-tools"], "none of --protocols linear-tools fits it"),
        (["--tasks", "rsd", "--fractions", "0.5,1"], "without --fractions"),
        (["--tasks", "rsd", "--protocols", "knn", "--seeds", "0,1"], "--seeds"),
        (["--tasks", "rsd", "--seeds", "0,0"], "--seeds"),
    ],
)
def test_bad_task_options_are_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    args = cli_args(tmp_path / "out", "synthetic", models="plstitch-tiny-synthetic")
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code != 0 and "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert not (tmp_path / "out").exists()


def test_a_task_whose_labels_a_dataset_lacks_fails_that_cell_only(
    datasets_file: Path, tmp_path: Path
) -> None:
    """`--anticipate tools` on synthetic (tool labels) and a folder dataset (none): the folder's fails."""
    out = tmp_path / "out"
    args = cli_args(out, str(datasets_file), models="plstitch-tiny-synthetic", protocols="knn")
    result = runner.invoke(
        app, [*args, "--tasks", "anticipation", "--horizon", HORIZON, "--anticipate", "tools"]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    table = table_json(out)
    status = {c["dataset"]: c["status"] for c in table["tasks"]["cells"]}
    assert status == {"synthetic": "done", "clips": "failed"} and table["cells"] == [] and not table["ok"]
    (failed,) = table["failed"]
    assert (failed["dataset"], failed["task"], failed["protocol"]) == ("clips", "anticipation", "knn")
    assert "has no tool labels" in failed["error"] and "\n" not in failed["error"]
    assert "Failed task cells (1" in (out / "table.md").read_text(encoding="utf-8")
    assert "1 of 2 cell(s) failed" in result.stderr


def test_cross_validated_and_temporal_task_cells(tmp_path: Path) -> None:
    """`--protocols temporal,cv`: seeded MS-TCN and CV cells; a CV cell equals `plstitch cv --task`."""
    out = tmp_path / "out"
    args = cli_args(out, small_datasets(tmp_path), models="plstitch-tiny-synthetic", protocols="temporal,cv")
    args += ["--tasks", "rsd", "--seeds", "0,1", "--folds", "2", "--temporal-epochs", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    block = table_json(out)["tasks"]
    assert [(c["protocol"], c["seed"]) for c in block["cells"]] == [
        ("temporal", 0),
        ("temporal", 1),
        ("cv", 0),
        ("cv", 1),
    ]
    assert [s["results_task"] for s in block["sections"]] == ["temporal-rsd", "cv-knn-rsd"]
    cv_cell = block["cells"][3]
    single = tmp_path / "cv.json"
    args = ["cv", "--features", cv_cell["features"], "--protocol", "knn", "--task", "rsd", "--folds", "2"]
    done = runner.invoke(app, [*args, "--seed", "1", "--device", "cpu", "--json", str(single)])
    assert done.exit_code == 0, done.output
    assert json.loads(single.read_text(encoding="utf-8"))["metrics"] == _results(cv_cell)["metrics"]
    cv = block["sections"][1]
    assert [d["kind"] for d in cv["differences"]] == []  # one model, and CV records no per-video references
    assert [r["row"] for r in cv["rows"]] == [
        "plstitch-tiny-synthetic",
        "reference: naive",
        "reference: elapsed-mean",
    ]


def test_the_plan_and_settings_of_task_cells(tmp_path: Path) -> None:
    config = BenchmarkConfig(
        MODELS, "synthetic", tmp_path / "out", tasks="rsd", protocols="knn,linear", cv_seed=3
    )
    assert config.seeds == (3,)  # --seeds left out: --seed's
    cells = plan_cells(config)
    assert [(c.task, c.protocol, c.seed) for c in cells] == [("rsd", "knn", None), ("rsd", "linear", 3)] * 2
    knn, linear = cells[:2]
    assert linear.name.endswith("| synthetic | rsd | linear | seed 3") and knn.name.endswith("| rsd | knn")
    settings = cell_settings(config, linear)
    assert (
        settings["seed"] == 3
        and settings["linear"]["seed"] == 3
        and settings["task"] == {"name": "rsd", "elapsed": False}
    )
    assert config.linear.seed == 0  # the phase cells keep --seed's linear probe
    assert "seed" not in cell_settings(config, knn)
