"""The cell plan and resume: an interrupted run finishes only its missing cells; a results file on disk is
done, stale (its store changed or is gone) or a conflict (other settings, not ours, not JSON)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import plstitch_eval.protocols.knn as knn_protocol
import plstitch_eval.protocols.linear as linear_protocol
from plstitch_eval.benchmark import runner as bench_runner
from plstitch_eval.benchmark.cells import (
    FEATURES_DIR,
    RESULTS_DIR,
    cell_state,
    plan_cells,
    read_cell_metrics,
    store_digest,
)
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.cli import app
from plstitch_eval.store.features import FeatureStore
from tests.eval.benchmark.conftest import SMALL_DATASET, cli_args, runner, table_json


def test_interrupted_run_finishes_only_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    datasets = str(tmp_path / "small.toml")
    Path(datasets).write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    args = cli_args(out, datasets, models="plstitch-tiny-synthetic")

    def killed(*_args, **_kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(linear_protocol, "run_linear", killed)  # the k-NN cell finishes, then the run is killed
        first = runner.invoke(app, args)
    assert first.exit_code == 130 and "rerun the same command" in first.stderr
    cell_dir = out / "results" / "plstitch-tiny-synthetic" / "synthetic"
    assert (cell_dir / "knn.json").is_file() and not (cell_dir / "linear.json").exists()
    assert not (out / "table.json").exists()
    knn_mtime = (cell_dir / "knn.json").stat().st_mtime_ns

    calls: dict[str, int] = {"run_knn": 0, "run_linear": 0}
    summaries = []
    homes = {"run_knn": knn_protocol, "run_linear": linear_protocol}  # where each registered protocol runs
    for name in calls:
        original = getattr(homes[name], name)

        def counted(*a, _name=name, _original=original, **kw):
            calls[_name] += 1
            return _original(*a, **kw)

        monkeypatch.setattr(homes[name], name, counted)
    original_extract = bench_runner.extract_many

    def recorded_extract(*a, **kw):
        summaries.append(original_extract(*a, **kw))
        return summaries[-1]

    monkeypatch.setattr(bench_runner, "extract_many", recorded_extract)
    second = runner.invoke(app, args)
    assert second.exit_code == 0, second.output
    assert calls == {"run_knn": 0, "run_linear": 1}
    assert (cell_dir / "knn.json").stat().st_mtime_ns == knn_mtime
    assert len(summaries) == 1 and {r.status for r in summaries[0].stores[0].results} == {
        "skipped"
    }  # resumed
    cells = table_json(out)["cells"]
    assert [(c["protocol"], c["status"], c["resumed"]) for c in cells] == [
        ("knn", "done", True),
        ("linear", "done", False),
    ]
    # the store that extraction reopened still matches both results: a third run computes nothing
    third = runner.invoke(app, args)
    assert third.exit_code == 0 and calls == {"run_knn": 0, "run_linear": 1} and len(summaries) == 1


def test_cells_run_model_major_and_know_their_files(tmp_path: Path) -> None:
    config = BenchmarkConfig(models="raw-pixels,a/b", datasets="synthetic", out=tmp_path, protocols="knn,cv")
    cells = plan_cells(config)
    assert [(c.model, c.protocol) for c in cells] == [
        ("raw-pixels", "knn"),
        ("raw-pixels", "cv"),
        ("a/b", "knn"),
        ("a/b", "cv"),
    ]
    assert cells[2].store == tmp_path / FEATURES_DIR / "a_b" / "synthetic" == cells[3].store
    assert cells[3].results_path == tmp_path / RESULTS_DIR / "a_b" / "synthetic" / "cv.json"
    assert cells[2].name == "a/b | synthetic | knn" and cells[2].status == "pending"


def test_a_results_file_is_done_stale_or_a_conflict(tmp_path: Path) -> None:
    config = BenchmarkConfig(models="raw-pixels", datasets="synthetic", out=tmp_path, protocols="knn")
    (cell,) = plan_cells(config)
    settings = config.settings(cell.model, cell.dataset, cell.protocol)
    assert cell_state(cell, settings) == ("missing", "")

    def write(data: object) -> None:
        cell.results_path.parent.mkdir(parents=True, exist_ok=True)
        cell.results_path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")

    write("{not json")
    state, why = cell_state(cell, settings)
    assert state == "conflict" and why.startswith("is not readable JSON")
    write({"metrics": {"accuracy": 1.0}})
    assert cell_state(cell, settings) == ("conflict", "was not written by `plstitch benchmark`")
    store = FeatureStore.create(cell.store, {"dataset": "synthetic", "model": {"spec": "raw-pixels"}})
    mark = {"settings": settings, "store_sha256": store_digest(store.manifest)}
    write({"metrics": {"accuracy": 50.0, "edit": None}, "metrics_std": {"accuracy": 1.5}, "benchmark": mark})
    assert cell_state(cell, settings) == ("done", "")
    assert read_cell_metrics(cell.results_path) == ({"accuracy": 50.0, "edit": None}, {"accuracy": 1.5})
    other = config.settings(cell.model, cell.dataset, "knn") | {"knn": {**settings["knn"], "k": 5}}
    state, why = cell_state(cell, other)
    assert state == "conflict" and why == "was made with other settings (knn.k: 20 -> 5)"
    store.write_manifest({**store.manifest, "created": "later"})
    changed = f"its feature store {cell.store} changed since it was scored"
    assert cell_state(cell, settings) == ("stale", changed)
    shutil.rmtree(cell.store)
    assert cell_state(cell, settings) == ("stale", f"its feature store {cell.store} is gone")
