"""Issue 64 item 3: a training run starts only in a new or empty folder or one of its own - never beside a
user's files, `.` included, with or without `--overwrite` - refused in one line before anything is built; a
folder holding a run is still the plan's to decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train.launch import plan_launch
from plstitch_train.presets import TrainConfig, get_preset


def _config(**changes: object) -> TrainConfig:
    return get_preset("tiny-cpu").replace(data="videos", **changes)


def _listing(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize("overwrite", [False, True])
def test_a_folder_holding_a_users_file_and_no_run_is_refused(tmp_path, overwrite):
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(ConfigError) as info:
        plan_launch(_config(), tmp_path, overwrite=overwrite)
    message = str(info.value)
    assert (
        f"--out {tmp_path} holds thesis.tex, which plstitch did not write" in message and "\n" not in message
    )
    assert _listing(tmp_path) == ["thesis.tex"]


def test_the_current_folder_holding_a_users_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    with pytest.raises(ConfigError, match=r"--out \. holds notes/, which plstitch did not write"):
        plan_launch(_config(), Path("."))


def test_resuming_into_an_out_holding_a_users_file_is_refused(tmp_path):
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    with pytest.raises(ConfigError, match="holds mine.txt"):
        plan_launch(_config(), out, resume=tmp_path / "run")


def test_a_folder_of_its_own_or_holding_a_run_is_not_refused(tmp_path):
    cache_only = tmp_path / "stopped-early"
    (cache_only / "frame_cache").mkdir(parents=True)  # a run stopped before its first checkpoint
    assert plan_launch(_config(), cache_only).action == "new"
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "train_config.json").write_text(json.dumps(_config().to_dict()))
    (run_dir / "notes.md").write_text("the user's notes on this run")
    assert plan_launch(_config(), run_dir).action == "new"  # the run's own plan: same settings continue
    assert plan_launch(_config(), tmp_path / "empty").action == "new"
