"""Issue 44: `-j` is `--num-workers` wherever that option exists - `plstitch train -j 1` included (the README
promises it)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
import typer
from typer.testing import CliRunner

import plstitch_train.launch as launch_module
from plstitch_eval.cli import app
from plstitch_train.launch import Launch
from plstitch_train.presets import get_preset
from plstitch_train.trainer import TrainResult


def _launch_of(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> Launch:
    """Run `plstitch train ARGS` with `run_launch` replaced; the Launch the command handed it."""
    captured: list[Launch] = []

    def fake_run_launch(launch: Launch) -> TrainResult:
        captured.append(launch)
        return TrainResult(out_dir=Path(launch.out_dir or tmp_path), step=0, total_steps=0)

    monkeypatch.setattr(launch_module, "run_launch", fake_run_launch)
    result = CliRunner().invoke(app, ["train", *args])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["step"] == 0
    return captured[0]


def test_train_short_j_sets_the_dataloader_workers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "videos").mkdir()
    args = ["--data", str(tmp_path / "videos"), "--preset", "tiny-cpu", "--out", str(tmp_path / "run")]
    preset_workers = get_preset("tiny-cpu").num_workers
    workers = preset_workers + 3  # differs from the preset's, so that the flag is seen to land
    short = _launch_of(monkeypatch, tmp_path, *args, "-j", str(workers))
    long = _launch_of(monkeypatch, tmp_path, *args, "--num-workers", str(workers))
    assert short.config.num_workers == long.config.num_workers == workers
    resumed = _launch_of(monkeypatch, tmp_path, "--resume", str(tmp_path / "run"), "-j", "1")
    assert resumed.runtime == {"num_workers": 1}


def test_every_num_workers_option_has_short_j_and_every_j_is_num_workers() -> None:
    def commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
        found: dict[str, click.Command] = {}
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                found.update(commands(command, f"{prefix}{name} "))
            else:
                found[prefix + name] = command
        return found

    with_long, with_short = set(), set()
    for name, command in commands(typer.main.get_command(app)).items():
        for param in command.params:
            opts = getattr(param, "opts", [])
            if "--num-workers" in opts:
                with_long.add(name)
            if "-j" in opts:
                with_short.add(name)
                assert "--num-workers" in opts, (name, opts)
    assert "train" in with_long and with_long == with_short
