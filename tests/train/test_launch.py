"""`plstitch_train.launch`: what a training request does with its run folder, decided before training."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError, TrainingError
from plstitch_eval.utils.console import logger
from plstitch_train.launch import base_config, plan_launch
from plstitch_train.presets import TrainConfig, get_preset


def _config(**changes: object) -> TrainConfig:
    return get_preset("tiny-cpu").replace(data="videos", **changes)


def _recorded_run(run_dir: Path, config: TrainConfig) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "train_config.json").write_text(json.dumps(config.to_dict()))
    return run_dir


def test_resume_and_overwrite_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--resume .* --overwrite"):
        plan_launch(_config(), tmp_path, resume=tmp_path, overwrite=True)


def test_out_is_required_without_resume() -> None:
    with pytest.raises(ConfigError, match="--out is required"):
        plan_launch(_config(), None)


def test_settings_are_validated_before_the_folder_is_read(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="exactly one data source"):
        plan_launch(get_preset("tiny-cpu"), tmp_path / "run")


def test_empty_folder_is_new_and_overwrite_of_nothing_is_new(tmp_path: Path) -> None:
    assert plan_launch(_config(), tmp_path / "run").action == "new"
    launch = plan_launch(_config(), tmp_path / "run", overwrite=True)
    assert launch.action == "new" and launch.out_dir == tmp_path / "run" and launch.config == _config()


def test_same_settings_continue_other_settings_are_refused(tmp_path: Path) -> None:
    run_dir = _recorded_run(tmp_path / "run", _config())
    assert plan_launch(_config(num_workers=2), run_dir).action == "new"  # runtime fields may change
    with pytest.raises(TrainingError, match=r"max_steps null -> 9.*--resume .*--overwrite"):
        plan_launch(_config(max_steps=9), run_dir)
    assert plan_launch(_config(max_steps=9), run_dir, overwrite=True).action == "overwrite"


def test_resume_keeps_only_given_runtime_settings_and_names_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logger, "propagate", True)  # a CLI run earlier in this process turned it off
    given = ["epochs", "device", "num_workers"]
    with caplog.at_level(logging.WARNING, logger="plstitch"):
        launch = plan_launch(_config(epochs=7, num_workers=3), None, resume=tmp_path / "run", given=given)
    assert launch.action == "resume" and launch.resume == tmp_path / "run" and launch.out_dir is None
    assert launch.config is None and launch.runtime == {"device": "cpu", "num_workers": 3}
    assert "epochs ignored" in caplog.text


def test_base_config_reads_a_train_config_json(tmp_path: Path) -> None:
    path = tmp_path / "train_config.json"
    path.write_text(json.dumps(_config(seed=5).to_dict()))
    assert base_config("paper-vitb16", path) == _config(seed=5)
    assert base_config("tiny-cpu") == get_preset("tiny-cpu")
    with pytest.raises(ConfigError, match="--config .*missing.json"):
        base_config("tiny-cpu", tmp_path / "missing.json")
