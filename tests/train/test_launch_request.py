"""`plstitch train`'s policy in `plstitch_train/launch.py`, without the CLI: which flag settings count as
given, `--set` items over the preset and under the flags (a setting given twice refused), and a session's
closing lines and exit codes (the run itself is a stand-in: `launch.run_launch` replaced)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train import launch as launch_module
from plstitch_train.launch import Launch, TrainRequest, print_summary, set_overrides, train_session
from plstitch_train.monitors.collapse import CollapseStop
from plstitch_train.presets import get_preset
from plstitch_train.trainer import TrainingInterrupted, TrainResult


def test_given_drops_unset_values_and_switches_left_off() -> None:
    settings = {
        "epochs": 0,  # given: zero is a value
        "seed": None,
        "reverse_time": False,  # a switch left off
        "compile": True,
        "data": Path("videos"),
        "context_seconds": (1.0, None),  # a range missing an end: not given
    }
    assert TrainRequest(settings).given() == {"epochs": 0, "compile": True, "data": "videos"}
    assert TrainRequest({"context_seconds": (1.0, 2.0)}).given() == {"context_seconds": (1.0, 2.0)}


def test_set_items_go_over_the_preset_and_are_named_as_given() -> None:
    request = TrainRequest(
        {"epochs": 2, "seed": None}, ["optim.base_lr=0.01", "clip_len=5"], preset="tiny-cpu"
    )
    config, given = request.config()
    assert (config.epochs, config.base_lr, config.clip_len) == (2, 0.01, 5)
    assert config.seed == get_preset("tiny-cpu").seed and given == ["epochs", "base_lr", "clip_len"]


def test_set_overrides_read_json_else_text_and_refuse_a_setting_twice() -> None:
    assert set_overrides(["epochs=3", "objective=pl", "context_seconds=[1, 2]"], []) == {
        "epochs": 3,
        "objective": "pl",
        "context_seconds": [1, 2],
    }
    with pytest.raises(ConfigError, match=r"^--set 'epochs': expected NAME=VALUE"):
        set_overrides(["epochs"], [])
    with pytest.raises(ConfigError, match=r"^--set 'optim.epochs=2': epochs is given twice"):
        set_overrides(["optim.epochs=2"], ["epochs"])
    with pytest.raises(ConfigError, match="epochs is given twice"):
        set_overrides(["epochs=1", "optim.epochs=2"], [])


def test_launch_checks_the_decoder_and_the_run_folder_first(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^--decoder must be one of"):
        TrainRequest({"decoder": "nosuch"}, preset="tiny-cpu").launch()
    with pytest.raises(ConfigError, match=r"^--out is required \(the run folder\)"):
        TrainRequest({"data": tmp_path}, preset="tiny-cpu").launch()
    (tmp_path / "videos").mkdir()
    request = TrainRequest(
        {"data": tmp_path / "videos", "epochs": 1}, preset="tiny-cpu", out=tmp_path / "run"
    )
    launch = request.launch()
    assert launch.action == "new" and launch.out_dir == tmp_path / "run" and launch.config.epochs == 1


@pytest.fixture
def session(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A request whose run is what the test says: a result, or an exception raised."""
    (tmp_path / "videos").mkdir()
    request = TrainRequest({"data": tmp_path / "videos"}, preset="tiny-cpu", out=tmp_path / "run")

    def run(outcome) -> int:
        def fake_run_launch(launch: Launch) -> TrainResult:
            if isinstance(outcome, BaseException):
                raise outcome
            return outcome

        monkeypatch.setattr(launch_module, "run_launch", fake_run_launch)
        return train_session(request)

    return run


def test_a_run_prints_its_summary_and_exits_0(session, tmp_path: Path, capsys) -> None:
    history = [{"step": 4, "loss": 1.5, "vid": 0.5, "lr": 0.1}]
    assert session(TrainResult(out_dir=tmp_path / "run", step=4, total_steps=4, history=history)) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary == {
        "out_dir": str(tmp_path / "run"),
        "step": 4,
        "total_steps": 4,
        "final": {"loss": 1.5, "vid": 0.5},
        "already_finished": False,
    }


def test_a_stopped_run_exits_128_plus_the_signal(session, capsys) -> None:
    assert session(TrainingInterrupted(signal.SIGTERM)) == 143
    assert "interrupted: stopped by SIGTERM" in capsys.readouterr().err


def test_a_collapsed_run_exits_3(session, capsys) -> None:
    assert session(CollapseStop(7, "run/last.ckpt")) == 3
    assert "collapsed: teacher collapsed: stopped at step 7" in capsys.readouterr().err


def test_only_rank_0_prints(session, tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("RANK", "1")
    assert session(TrainingInterrupted(signal.SIGINT)) == 130
    assert session(TrainResult(out_dir=tmp_path / "run", step=1, total_steps=1)) == 0
    assert capsys.readouterr() == ("", "")


def test_a_finished_run_says_so_on_stderr(tmp_path: Path, capsys) -> None:
    print_summary(TrainResult(out_dir=tmp_path, step=9, total_steps=9, already_finished=True))
    out, err = capsys.readouterr()
    assert json.loads(out)["already_finished"] is True
    assert "already finished (9 steps; backbone in" in err and "Use --overwrite to train it again." in err
