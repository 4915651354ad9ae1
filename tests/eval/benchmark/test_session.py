"""`plstitch_eval/benchmark/session.py` without the CLI: the protocols' settings from a config file and
`--set` (the latter wins, devices resolved), and a run's closing lines and exit codes (the run itself is a
stand-in: `runner.run_benchmark` replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plstitch_eval.benchmark import runner, session
from plstitch_eval.benchmark.cells import Cell
from plstitch_eval.benchmark.datasets_file import DatasetSpec
from plstitch_eval.benchmark.runner import BenchmarkResult
from plstitch_eval.benchmark.session import benchmark_session, failed_cells_line, protocol_tables
from plstitch_eval.errors import ConfigError
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.temporal.fit import TemporalConfig


def test_protocol_tables_set_goes_over_the_file_and_devices_resolve(tmp_path: Path) -> None:
    config = tmp_path / "protocols.toml"
    config.write_text("[protocols.knn]\nk = 10\ntemperature = 0.05\n\n[protocols.temporal]\nepochs = 3\n")
    settings = protocol_tables(config, ["knn.k=7", "linear.epochs=4"], "cpu")
    assert settings.bases["knn"] == KnnConfig(k=7, temperature=0.05)
    assert settings.bases["linear"] == LinearConfig(epochs=4)
    assert settings.bases["temporal"] == TemporalConfig(epochs=3)
    assert settings.devices == {"knn": "cpu", "linear": "cpu", "temporal": "cpu"}
    assert settings.section("linear") == {"device": "cpu", "base": LinearConfig(epochs=4)}
    assert settings.unsectioned == {}


def test_protocol_tables_without_file_or_set_are_the_defaults() -> None:
    settings = protocol_tables(None, None, None)
    assert settings.tables == {} and settings.bases["knn"] == KnnConfig()
    assert set(settings.devices) == {"knn", "linear", "temporal"}  # `auto`, resolved on this machine
    assert all(device in ("cpu", "cuda", "cuda:0") for device in settings.devices.values())


def test_protocol_tables_refuse_an_unknown_protocol_in_one_line() -> None:
    with pytest.raises(ConfigError) as caught:
        protocol_tables(None, ["nosuch.k=3"], "cpu")
    assert "\n" not in str(caught.value) and "nosuch" in str(caught.value)


def _cells(*statuses: str) -> list[Cell]:
    dataset = DatasetSpec("synthetic")
    return [
        Cell(f"model{i}", f"model{i}", dataset, "knn", Path("out"), status=status)
        for i, status in enumerate(statuses)
    ]


class _Config:
    out = Path("bench-out")


def _result(tmp_path: Path, cells: list[Cell], table: bool = True) -> BenchmarkResult:
    if not table:
        return BenchmarkResult(tmp_path, cells, rank=1)
    md, js = tmp_path / "table.md", tmp_path / "table.json"
    return BenchmarkResult(tmp_path, cells, {"rows": []}, "| model | k-NN |", md, js)


@pytest.fixture
def run_returns(monkeypatch: pytest.MonkeyPatch):
    """Make `runner.run_benchmark` return (or raise) what the test says."""

    def set_outcome(outcome) -> None:
        def fake(config):
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        monkeypatch.setattr(runner, "run_benchmark", fake)

    return set_outcome


def test_a_finished_run_prints_the_table_and_exits_0(run_returns, tmp_path: Path, capsys) -> None:
    run_returns(_result(tmp_path, _cells("done", "done")))
    assert benchmark_session(_Config(), None) == 0
    out, err = capsys.readouterr()
    assert "| model | k-NN |" in out and f"table: {tmp_path / 'table.md'}" in err


def test_json_on_stdout_moves_the_table_to_stderr(run_returns, tmp_path: Path, capsys) -> None:
    run_returns(_result(tmp_path, _cells("done")))
    assert benchmark_session(_Config(), Path("-")) == 0
    out, err = capsys.readouterr()
    assert out.strip() == '{\n  "rows": []\n}' and "| model | k-NN |" in err


def test_failed_cells_exit_1_naming_the_first_three(run_returns, tmp_path: Path, capsys) -> None:
    result = _result(tmp_path, _cells("failed", "done", "failed", "failed", "failed"))
    run_returns(result)
    assert benchmark_session(_Config(), None) == 1
    line = failed_cells_line(result)
    assert line.startswith("4 of 5 cell(s) failed (") and line.count("model") == 3 and " ...)" in line
    assert line in capsys.readouterr().err.replace("\n", "")


def test_an_interrupted_run_exits_130_and_says_how_to_finish(run_returns, capsys) -> None:
    run_returns(KeyboardInterrupt())
    assert benchmark_session(_Config(), None) == 130
    err = capsys.readouterr().err
    assert "interrupted: bench-out holds every cell finished so far" in err


def test_a_rank_other_than_0_reports_nothing(run_returns, tmp_path: Path, capsys) -> None:
    run_returns(_result(tmp_path, _cells("failed"), table=False))
    assert benchmark_session(_Config(), None) == 0
    assert capsys.readouterr() == ("", "")


def test_the_module_calls_the_runner_through_its_module() -> None:
    """A stand-in set on `runner` reaches the session (the CLI tests replace it there)."""
    assert session.runner is runner
