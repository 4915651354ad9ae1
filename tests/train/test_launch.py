"""`plstitch_train.launch`: what a training request does with its run folder, decided before training."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError, TrainingError
from plstitch_eval.utils.console import logger
from plstitch_train.data import discover_videos
from plstitch_train.frames_lmdb import write_frames_lmdb
from plstitch_train.launch import Launch, base_config, plan_launch, run_launch
from plstitch_train.presets import TrainConfig, get_preset
from plstitch_train.trainer import TrainResult, train
from tests.train.conftest import tiny_config


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


def test_a_frames_lmdb_sets_the_fps_unless_fps_is_given(video_dir: Path, tmp_path: Path) -> None:
    """The LMDB's recorded rate (4 fps here; the preset says 2) wins unless --fps was given; a given --fps
    that differs is refused naming both rates; videos keep the preset's fps."""
    lmdb_dir = write_frames_lmdb(discover_videos(video_dir, 4.0), tmp_path / "frames.lmdb", 4.0, 36)
    config = get_preset("tiny-cpu").replace(data=str(lmdb_dir))
    assert config.fps == 2.0
    assert plan_launch(config, tmp_path / "run").config.fps == 4.0
    assert plan_launch(config.replace(fps=4.0), tmp_path / "run", given=["fps"]).config.fps == 4.0
    refused = r"--fps 2: --data .*frames.lmdb holds frames at 4 fps.*leave out --fps"
    with pytest.raises(ConfigError, match=refused):
        plan_launch(config, tmp_path / "run", given=["data", "fps"])
    assert plan_launch(_config(), tmp_path / "run").config.fps == 2.0  # a video folder: the preset's rate


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


def test_a_launch_decides_new_or_resume_once(
    monkeypatch: pytest.MonkeyPatch, video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    """`plan_launch` decides; `run_launch` hands the decision to `train`, which does not decide again. Called
    from Python without a plan, `train` decides itself (once)."""
    import plstitch_train.run.plan as run_dir_module

    decided: list[Path] = []
    real_plan_run = run_dir_module.plan_run

    def counting_plan_run(config: TrainConfig, run_dir: Path, overwrite: bool = False) -> str:
        decided.append(run_dir)
        return real_plan_run(config, run_dir, overwrite)

    monkeypatch.setattr(run_dir_module, "plan_run", counting_plan_run)
    config = tiny_config(video_dir, frame_cache, max_steps=1)
    out = tmp_path / "run"
    assert run_launch(plan_launch(config, out)).step == 1
    assert decided == [out]
    assert run_launch(plan_launch(config, out)).already_finished  # a rerun: finished, decided once
    assert decided == [out, out]
    assert train(config, out).already_finished and decided == [out, out, out]
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    result = _cli_train("--config", str(config_file), "--out", str(tmp_path / "cli"))
    assert result.exit_code == 0, result.output  # `plstitch train`: one decision as well
    assert decided == [out, out, out, tmp_path / "cli"]
    with pytest.raises(ConfigError, match="plan='later'"):
        train(config, out, plan="later")


def test_base_config_reads_a_train_config_json(tmp_path: Path) -> None:
    path = tmp_path / "train_config.json"
    path.write_text(json.dumps(_config(seed=5).to_dict()))
    assert base_config("paper-vitb16", path) == _config(seed=5)
    path.write_text(json.dumps(_config(seed=5).to_flat_dict()))  # as run folders saved it before the sections
    assert base_config("paper-vitb16", path) == _config(seed=5)
    assert base_config("tiny-cpu") == get_preset("tiny-cpu")
    with pytest.raises(ConfigError, match="--config .*missing.json"):
        base_config("tiny-cpu", tmp_path / "missing.json")


# --- `plstitch train` flags -> TrainConfig (the launch is intercepted: nothing is trained) ----------------


def _cli_train(*args: str):
    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    return CliRunner().invoke(app, ["train", *args])


def _cli_launch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> Launch:
    """Run `plstitch train ARGS` with `run_launch` replaced; return the Launch the command handed it."""
    from typer.testing import CliRunner

    import plstitch_train.launch as launch_module
    from plstitch_eval.cli import app

    captured: list[Launch] = []

    def fake_run_launch(launch: Launch) -> TrainResult:
        captured.append(launch)
        return TrainResult(out_dir=Path(launch.out_dir or tmp_path), step=0, total_steps=0)

    monkeypatch.setattr(launch_module, "run_launch", fake_run_launch)
    result = CliRunner().invoke(app, ["train", *args])
    assert result.exit_code == 0, result.output
    assert len(captured) == 1
    assert json.loads(result.stdout.strip().splitlines()[-1])["step"] == 0
    return captured[0]


def test_cli_flags_land_on_their_train_config_fields(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "videos").mkdir()
    args = ["--data", str(tmp_path / "videos"), "--preset", "tiny-cpu", "--out", str(tmp_path / "run")]
    flags = [
        *("--lambda-vid", "0.25", "--lambda-mim", "0.5", "--lambda-jigsaw", "0.75"),
        *("--objective", "pairwise", "--clip-len", "6", "--context-seconds", "0.2", "3.5"),
        *("--reverse-time", "--init", "ibot-vitb16", "--epochs", "7", "--steps", "11", "--lr", "0.003"),
    ]
    launch = _cli_launch(monkeypatch, tmp_path, *args, *flags)
    assert launch.action == "new" and launch.out_dir == tmp_path / "run" and launch.resume is None
    expected = get_preset("tiny-cpu").replace(
        data=str(tmp_path / "videos"),
        lambda_vid=0.25,
        lambda_mim=0.5,
        lambda_jigsaw=0.75,
        objective="pairwise",
        clip_len=6,
        context_seconds=(0.2, 3.5),
        reverse_time=True,
        init="ibot-vitb16",
        epochs=7,
        max_steps=11,
        base_lr=0.003,  # the base lr: the batch/256 scaling happens in the schedule, not here
    )
    assert launch.config == expected
    assert launch.config.context_seconds == (0.2, 3.5)  # a tuple (MIN, MAX), as the preset's


def test_cli_without_flags_keeps_the_preset_and_zero_weights_are_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "videos").mkdir()
    args = ["--data", str(tmp_path / "videos"), "--preset", "tiny-cpu", "--out", str(tmp_path / "run")]
    launch = _cli_launch(monkeypatch, tmp_path, *args)
    assert launch.config == get_preset("tiny-cpu").replace(data=str(tmp_path / "videos"))
    assert launch.config.reverse_time is False and launch.config.max_steps is None
    # 0 turns a branch off: it must reach the config, not be taken for "not given"
    launch = _cli_launch(
        monkeypatch,
        tmp_path,
        *args,
        "--lambda-jigsaw",
        "0",
        "--lambda-mim",
        "0",
        "--objective",
        "permutation",
    )
    assert launch.config.lambda_jigsaw == 0.0 and launch.config.lambda_mim == 0.0
    assert launch.config.lambda_vid == get_preset("tiny-cpu").lambda_vid
    assert launch.config.objective == "permutation"


def test_cli_resume_passes_only_runtime_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    launch = _cli_launch(
        monkeypatch, tmp_path, "--resume", str(run_dir), "--epochs", "9", "--num-workers", "3"
    )
    assert launch.action == "resume" and launch.resume == run_dir and launch.config is None
    assert launch.runtime == {"num_workers": 3}


def test_cli_set_takes_flat_and_section_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "videos").mkdir()
    args = ["--data", str(tmp_path / "videos"), "--preset", "tiny-cpu", "--out", str(tmp_path / "run")]
    sets = [
        *("--set", "optim.base_lr=0.003", "--set", "epochs=7", "--set", "context_seconds=[0.2, 3.5]"),
        *("--set", "model.init=ibot-vitb16", "--set", "loss.lambda_jigsaw=0", "--set", "max_steps=null"),
    ]
    launch = _cli_launch(monkeypatch, tmp_path, *args, *sets)
    expected = get_preset("tiny-cpu").replace(
        data=str(tmp_path / "videos"),
        base_lr=0.003,
        epochs=7,
        context_seconds=(0.2, 3.5),
        init="ibot-vitb16",
        lambda_jigsaw=0.0,
    )
    assert launch.config == expected and launch.config.context_seconds == (0.2, 3.5)
    resume = ["--resume", str(tmp_path / "run"), "--set", "run.num_workers=3"]
    resumed = _cli_launch(monkeypatch, tmp_path, *resume)
    assert resumed.runtime == {"num_workers": 3}


@pytest.mark.parametrize(
    ("sets", "words"),
    [
        (["--set", "epochs=3", "--epochs", "4"], "epochs is given twice"),
        (["--set", "epochs=3", "--set", "optim.epochs=4"], "epochs is given twice"),
        (["--set", "optim.lr=1"], "Unknown training setting 'optim.lr'"),
        (["--set", "model.base_lr=1"], "base_lr belongs to section 'optim'"),
        (["--set", "epochs"], "expected NAME=VALUE"),
        (["--set", "epochs=0"], "epochs must be >= 1"),
    ],
)
def test_cli_set_refusals_are_one_line(sets: list[str], words: str, tmp_path: Path) -> None:
    args = ["--data", str(tmp_path), "--preset", "tiny-cpu", "--out", str(tmp_path / "run")]
    result = _cli_train(*args, *sets)
    assert result.exit_code == 1
    assert words in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "run").exists()
