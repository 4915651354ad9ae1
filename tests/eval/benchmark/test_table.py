"""The benchmark's table: our numbers with the paper's beside them (bold best per column, † where the paper
measured another checkpoint) and the failed cells grouped with their errors."""

from __future__ import annotations

from pathlib import Path

from plstitch_eval.benchmark.cells import plan_cells
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.datasets_file import DatasetSpec
from plstitch_eval.benchmark.models import expand_models
from plstitch_eval.benchmark.table import SCHEMA, benchmark_table, format_value, table_markdown
from plstitch_eval.extract import ExtractOptions
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig


def test_paper_numbers_sit_beside_ours(tmp_path: Path) -> None:
    root = tmp_path / "cholec80"
    root.mkdir()
    config = BenchmarkConfig(
        models="pl-stitch-lemon,dino-vitb16",
        datasets=[DatasetSpec("cholec80", root=root)],
        out=tmp_path / "out",
        protocols="knn",
        metrics="accuracy",
        extract=ExtractOptions(device="cpu"),
        knn=KnnConfig(),
        linear=LinearConfig(device="cpu"),
    )
    cells = plan_cells(config)
    for cell, accuracy in zip(cells, (80.0, 70.0), strict=True):  # filled by hand: nothing is loaded
        cell.status, cell.metrics = "done", {"accuracy": accuracy}
    markdown = table_markdown(benchmark_table(config, cells))
    assert "| pl-stitch-lemon | **80.0** (81.7) |" in markdown
    assert "| dino-vitb16 | 70.0 (69.4†) |" in markdown
    # every method of the paper's tables has a registry entry now (Endo-FM, VideoMAEv2, T-CoRe: issue 17)
    assert "no loadable checkpoint" not in markdown
    assert {"endo-fm", "videomaev2-vitb16", "t-core-vitb16"} <= set(expand_models("paper-surgical"))


def test_failed_cells_are_grouped_and_escaped(tmp_path: Path) -> None:
    config = BenchmarkConfig(
        models="raw-pixels,random-init:raw-pixels", datasets="synthetic", out=tmp_path, protocols="knn,linear"
    )
    cells = plan_cells(config)
    cells[0].status, cells[0].metrics, cells[0].metrics_std = "done", {"accuracy": 50.0}, {"accuracy": 2.5}
    for cell in cells[2:]:
        cell.status, cell.error = "failed", "load model: no\nsuch | file"
    table = benchmark_table(config, cells)
    assert table["schema"] == SCHEMA and not table["ok"] and len(table["failed"]) == 2
    assert table["columns"][0]["header"] == "synthetic k-NN Acc"
    assert table["cells"][0]["paper"] is None and table["cells"][2]["results"] is None
    markdown = table_markdown(table)
    assert markdown.startswith("| Model | synthetic k-NN Acc |") and "(x)" not in markdown
    assert "| raw-pixels | 50.0 ± 2.5 |" in markdown  # alone in its column: not bold
    assert "| random-init:raw-pixels | failed | failed |" in markdown
    assert "Failed cells (2; rerun the same command to retry them):" in markdown
    assert "| random-init:raw-pixels | synthetic | knn, linear | load model: no such \\| file |" in markdown


def test_numbers_as_the_table_shows_them() -> None:
    assert format_value(81.66) == "81.7" and format_value(81.66, 1.23) == "81.7 ± 1.2"
    assert format_value(None) == format_value(float("nan")) == format_value("x") == "-"
    assert format_value(5.0, float("nan")) == "5.0"
