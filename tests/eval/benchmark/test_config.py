"""`BenchmarkConfig`: the CLI forms of models and datasets accepted, bad values refused up front (one line on
the CLI, nothing written), and the settings a cell's numbers depend on (runtime fields left out)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.datasets_file import DatasetSpec
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.knn_vote import KnnConfig
from tests.eval.benchmark.conftest import cli_args, runner


def test_bad_input_is_one_line_on_the_cli(tmp_path: Path) -> None:
    result = runner.invoke(app, cli_args(tmp_path / "out", "nope"))
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Unknown dataset 'nope'" in lines[0] and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def config(tmp_path: Path, **overrides) -> BenchmarkConfig:
    return BenchmarkConfig(**{"models": "raw-pixels", "datasets": "synthetic", "out": tmp_path, **overrides})


def test_cli_forms_are_parsed(tmp_path: Path) -> None:
    mine = DatasetSpec("mine", "synthetic")
    made = config(tmp_path, models=["raw-pixels,raw-pixels"], datasets=["synthetic", mine])
    assert made.models == ["raw-pixels"] and [d.name for d in made.datasets] == ["synthetic", "mine"]
    assert made.protocols == ("knn", "linear") and made.metrics is None and made.out == tmp_path
    assert made.task("cv") == "cv-knn" and made.task("knn") == "knn"
    assert made.table_metrics(made.datasets[0], "linear-tools") == ("mAP",)
    assert config(tmp_path, metrics="accuracy").table_metrics(made.datasets[0], "knn") == ("accuracy",)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"datasets": []}, "--datasets names no dataset"),
        ({"datasets": ["synthetic", DatasetSpec("synthetic")]}, "'synthetic' is given twice"),
        ({"cv_protocol": "svm"}, "--cv-protocol must be one of knn, linear, temporal"),
        ({"cv_folds": 1}, "--folds must be >= 2"),
        ({"val_fraction": 1.0}, "--val-fraction must be between 0 and 1"),
        ({"knn": {"k": 5}}, "BenchmarkConfig.knn must be a KnnConfig"),
    ],
)
def test_bad_configs_are_refused(tmp_path: Path, overrides: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        config(tmp_path, **overrides)


def test_settings_hold_what_changes_the_numbers_only(tmp_path: Path) -> None:
    base = config(tmp_path)
    dataset = base.datasets[0]
    settings = base.settings("raw-pixels", dataset, "knn")
    assert settings["knn"]["k"] == 20 and "device" not in settings["knn"] and "linear" not in settings
    on_gpu = config(tmp_path, knn=dataclasses.replace(KnnConfig(), device="cuda"))
    assert on_gpu.settings("raw-pixels", dataset, "knn") == settings  # the runtime fields are not settings
    assert config(tmp_path, knn=KnnConfig(k=5)).settings("raw-pixels", dataset, "knn") != settings
    cv = config(tmp_path, cv_protocol="linear").settings("raw-pixels", dataset, "cv")
    assert (cv["folds"], cv["inner"], "linear" in cv, "knn" in cv) == (5, "linear", True, False)
    tools = base.settings("raw-pixels", dataset, "linear-tools")
    assert tools["linear"]["balance_classes"] is True and tools["val_fraction"] == 0.2
