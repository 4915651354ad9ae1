"""`plstitch benchmark --fractions`: every cell at every fraction, cells at a fraction never taken for full
cells (nor for other seeds) on reuse, and the label-efficiency table, paired differences and figure."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from plstitch_eval.benchmark.cells import cell_state, plan_cells
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.label_efficiency import curve_metrics, per_video_key
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from tests.eval.benchmark.conftest import SMALL_DATASET, cli_args, runner, table_json

MODELS = "plstitch-tiny-synthetic,raw-pixels"


def _config(tmp_path: Path, **fields) -> BenchmarkConfig:
    return BenchmarkConfig(MODELS, "synthetic", tmp_path / "out", protocols="knn", **fields)


def test_every_cell_at_every_fraction_with_its_own_file_and_settings(tmp_path: Path) -> None:
    config = _config(tmp_path, fractions="1,0.25", fraction_seeds="2")
    assert config.fractions == (0.25, 1.0) and config.fraction_seeds == (0, 1) and config.label_efficiency
    cells = plan_cells(config)
    assert [(c.model, c.fraction) for c in cells] == [(m, f) for m in MODELS.split(",") for f in (0.25, 1.0)]
    quarter, full = cells[:2]
    assert quarter.store == full.store  # one store per (model, dataset), read at every fraction
    assert quarter.results_path != full.results_path and "fraction-0.25" in str(quarter.results_path)
    assert quarter.name.endswith("| 1/4 of train") and full.name.endswith("| knn")
    settings = config.settings(full.model, full.dataset, "knn", 0.25)
    assert settings["train_fraction"] == {"fraction": 0.25, "seeds": [0, 1]}
    today = _config(tmp_path).settings(full.model, full.dataset, "knn")
    assert config.settings(full.model, full.dataset, "knn", 1.0) == today  # full cells: settings as before
    assert "train_fraction" not in today
    assert config.at_fraction(1.0).train_fraction is None
    assert config.at_fraction(0.25).train_fraction.seeds == (0, 1) and config.train_fraction is None


def test_a_fraction_cell_is_never_taken_for_a_full_cell_on_reuse(tmp_path: Path) -> None:
    """A results file at one fraction (or made with other subset seeds) found where another cell's goes is a
    conflict, never `done`."""
    config = _config(tmp_path, fractions="0.5,1")
    half, full = plan_cells(config)[:2]
    for cell, fraction in ((half, 0.5), (full, 1.0)):
        cell.results_path.parent.mkdir(parents=True, exist_ok=True)
        mark = {"settings": config.settings(cell.model, cell.dataset, "knn", fraction), "store_sha256": "x"}
        cell.results_path.write_text(json.dumps({"benchmark": mark}))
    half_settings = config.settings(half.model, half.dataset, "knn", 0.5)
    full_settings = config.settings(full.model, full.dataset, "knn", 1.0)
    shutil.copy(half.results_path, tmp_path / "half.json")
    shutil.copy(full.results_path, half.results_path)  # a full cell where the 1/2 cell goes
    state, why = cell_state(half, half_settings)
    assert state == "conflict" and "train_fraction" in why
    shutil.copy(tmp_path / "half.json", full.results_path)  # a 1/2 cell where the full cell goes
    state, why = cell_state(full, full_settings)
    assert state == "conflict" and "train_fraction" in why
    shutil.copy(tmp_path / "half.json", half.results_path)  # the 1/2 cell, asked with other seeds
    other_seeds = _config(tmp_path, fractions="0.5,1", fraction_seeds="0,7")
    state, why = cell_state(half, other_seeds.settings(half.model, half.dataset, "knn", 0.5))
    assert state == "conflict" and "train_fraction.seeds" in why


@pytest.mark.parametrize(
    ("fractions", "seeds"), [("0,1", "3"), ("1/8,x", "3"), ("0.5", "0,0"), ("0.5", "-2")]
)
def test_bad_fractions_are_one_line_naming_the_flag(tmp_path: Path, fractions: str, seeds: str) -> None:
    with pytest.raises(ConfigError, match="--fractions|--fraction-seeds"):
        _config(tmp_path, fractions=fractions, fraction_seeds=seeds)


def test_curve_metrics_and_their_per_video_pairs(tmp_path: Path) -> None:
    config = _config(tmp_path)
    assert curve_metrics(config, config.datasets[0], "knn") == ("accuracy", "macro_f1_video")
    assert per_video_key("macro_f1_video", {"accuracy": 1, "macro_f1": 2}) == "macro_f1"
    assert per_video_key("mAP", {"mAP": 1}) == "mAP" and per_video_key("edit", {"accuracy": 1}) is None


def test_one_command_gives_the_curves_paired_differences_and_figure(tmp_path: Path) -> None:
    out = tmp_path / "out"
    datasets = tmp_path / "small.toml"
    datasets.write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    args = [*cli_args(out, str(datasets), models=MODELS, protocols="knn"), "--fractions", "0.5,1"]
    first = runner.invoke(app, [*args, "--fraction-seeds", "2"])
    assert first.exit_code == 0, first.output
    assert "Label efficiency" in first.stdout and "label_efficiency.png" in first.stderr
    cells = table_json(out)["cells"]
    assert sorted((c["model"], c["fraction"]) for c in cells) == [
        (m, f) for m in MODELS.split(",") for f in (0.5, 1.0)
    ]
    files = {(c["model"], c["fraction"]): Path(c["results"]) for c in cells}
    half = json.loads(files[("plstitch-tiny-synthetic", 0.5)].read_text())
    assert half["benchmark"]["settings"]["train_fraction"] == {"fraction": 0.5, "seeds": [0, 1]}
    assert [s["seed"] for s in half["train_fraction"]["subsets"]] == [0, 1]
    data = json.loads((out / "label_efficiency.json").read_text())
    assert data["schema"] == "plstitch.label-efficiency/v1" and data["fractions"] == [0.5, 1.0]
    points = {(c["model"], c["fraction"]): c for c in data["curves"]}
    assert points[("raw-pixels", 0.5)]["seeds"] == [0, 1] and points[("raw-pixels", 1.0)]["seeds"] is None
    subsets = {tuple(s["videos"]) for s in half["train_fraction"]["subsets"]}
    raw_half = json.loads(
        Path(
            next(c for c in cells if c["model"] == "raw-pixels" and c["fraction"] == 0.5)["results"]
        ).read_text()
    )
    assert {
        tuple(s["videos"]) for s in raw_half["train_fraction"]["subsets"]
    } == subsets  # paired: same videos
    diffs = [d for d in data["differences"] if d["metric"] == "accuracy"]
    assert {d["fraction"] for d in diffs} == {0.5, 1.0}
    for d in diffs:
        assert (d["a"], d["b"], d["per_video_metric"]) == (
            "plstitch-tiny-synthetic",
            "raw-pixels",
            "accuracy",
        )
        assert d["videos"] == 2 and d["confidence"] == 0.95 and "ci_low" in d
    assert (out / "label_efficiency.png").stat().st_size > 10_000
    assert "Paired differences" in (out / "label_efficiency.md").read_text()

    again = runner.invoke(app, [*args, "--fraction-seeds", "2"])  # everything reused
    assert again.exit_code == 0 and again.stderr.count("finished earlier") == 4
    full_only = runner.invoke(app, args[:-2])  # the full cells, as a run without --fractions
    assert full_only.exit_code == 0 and full_only.stderr.count("finished earlier") == 2
    other = runner.invoke(app, [*args, "--fraction-seeds", "3"])  # the fraction cells were made with 2 seeds
    assert other.exit_code == 1 and "train_fraction.seeds" in other.stderr
