"""The trainer's user-facing errors: each is a PlstitchError naming the file or setting at fault and the fix.

Every error is triggered the way a user meets it (a bad data folder, a bad batch split, resuming the wrong
checkpoint); through the CLI each is one `error:` line on stderr, exit code 1, no traceback.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError, DataError, DecodeError, PlstitchError, TrainingError
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, LOG_NAME
from plstitch_train.presets import TrainConfig
from plstitch_train.trainer import train
from tests.media import write_audio_only
from tests.train.conftest import tiny_config, write_mp4

runner = CliRunner()


def _config_file(config: TrainConfig, folder: Path) -> Path:
    path = folder / "config.json"
    path.write_text(json.dumps(config.to_dict()))
    return path


def _cli_error(args: list[str]) -> str:
    """Run `plstitch ARGS`, check it failed as a user error (exit 1, one `error:` line); return that line."""
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run stopped after 1 step: a real last.ckpt to resume (its own videos and cache)."""
    root = tmp_path_factory.mktemp("stopped")
    write_mp4(root / "videos" / "a.mp4", 24, seed=0)
    write_mp4(root / "videos" / "b.mp4", 32, seed=1)
    config = tiny_config(root / "videos", root / "cache", max_steps=3)
    train(config, root / "run", stop_after=1)
    assert (root / "run" / CHECKPOINT_NAME).is_file()
    return root / "run"


# --- resuming -----------------------------------------------------------------------------------------------


def test_resume_of_a_folder_without_checkpoint_names_the_missing_file(tmp_path: Path) -> None:
    folder = tmp_path / "not_a_run"
    folder.mkdir()
    with pytest.raises(TrainingError, match="Cannot resume") as caught:
        train(resume=folder)
    assert str(folder / CHECKPOINT_NAME) in str(caught.value)
    assert f"pass a run folder or its {CHECKPOINT_NAME}" in str(caught.value)
    line = _cli_error(["train", "--resume", str(folder)])
    assert "Cannot resume" in line and str(folder / CHECKPOINT_NAME) in line


def test_resume_of_a_corrupt_checkpoint_names_the_file(tmp_path: Path) -> None:
    bogus = tmp_path / CHECKPOINT_NAME
    bogus.write_bytes(b"half a checkpoint, cut off by a full disk")
    with pytest.raises(TrainingError, match="as a training checkpoint") as caught:
        train(resume=tmp_path)
    assert f"Cannot read {bogus}" in str(caught.value)
    line = _cli_error(["train", "--resume", str(bogus)])
    assert f"Cannot read {bogus} as a training checkpoint" in line


def _official_like_checkpoint(path: Path) -> None:
    """A checkpoint as the authors' trainer saves it: weights beside an argparse Namespace."""
    torch.save({"student": {"w": torch.zeros(2)}, "args": argparse.Namespace(lr=0.1)}, path)


@pytest.mark.parametrize(
    ("name", "write", "reason"),
    [
        ("notamodel.txt", lambda p: p.write_text("e = mc^2\n"), "not a file written by torch.save"),
        ("noise.bin", lambda p: p.write_bytes(np.random.default_rng(3).bytes(4096)), "not a file written by"),
        ("empty.ckpt", lambda p: p.write_bytes(b""), "the file is empty"),
        ("weights.pth", lambda p: torch.save({"model": {"w": torch.zeros(2)}}, p), "no training state"),
        ("tensor.pt", lambda p: torch.save(torch.zeros(3), p), "it holds a Tensor"),
        ("pl_lemon.pth", _official_like_checkpoint, "Python objects besides tensors"),
    ],
)
def test_resume_of_a_file_that_is_no_training_checkpoint_is_one_line_with_the_fix(
    name: str, write, reason: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text, random bytes, an empty file, model-only weights: one line naming the file, why, and the fix."""
    monkeypatch.chdir(tmp_path)  # `--resume FILE` as typed in the folder that holds it
    write(tmp_path / name)
    result = runner.invoke(app, ["train", "--resume", name])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr  # the whole message on one line: no loader essay after it
    line = lines[0]
    assert line.startswith(f"error: Cannot read {name} as a training checkpoint: "), line
    assert reason in line
    assert "pass a run folder or its last.ckpt" in line and "--init FILE" in line
    assert not any((tmp_path / f).exists() for f in ("log.jsonl", "train_config.json"))  # nothing written


def test_resume_of_a_checkpoint_from_another_model_is_refused(stopped_run: Path, tmp_path: Path) -> None:
    """A last.ckpt whose weights do not fit the model its config builds (e.g. copied from another run)."""
    checkpoint = torch.load(stopped_run / CHECKPOINT_NAME, weights_only=True)
    checkpoint["config"]["model_args"]["embed_dim"] = 48  # the config now builds a wider ViT
    target = tmp_path / "mixed"
    target.mkdir()
    torch.save(checkpoint, target / CHECKPOINT_NAME)
    with pytest.raises(TrainingError, match="does not match the model built from its config") as caught:
        train(resume=target)
    assert "size mismatch" in str(caught.value) and "student.backbone" in str(caught.value)
    assert not (target / LOG_NAME).exists()  # nothing trained or logged


def test_resume_into_an_out_holding_another_run_is_refused(stopped_run: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / LOG_NAME).write_text('{"step": 1}\n')
    with pytest.raises(TrainingError, match="already holds a run") as caught:
        train(resume=stopped_run, out_dir=other)
    assert f"resume {stopped_run} in place or give an empty --out" in str(caught.value)
    assert (other / LOG_NAME).read_text() == '{"step": 1}\n'  # untouched
    line = _cli_error(["train", "--resume", str(stopped_run), "--out", str(other)])
    assert f"--out {other} already holds a run" in line


# --- batch split --------------------------------------------------------------------------------------------


def test_batch_size_not_a_multiple_of_accum_steps_fails_before_decoding(
    video_dir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    config = tiny_config(video_dir, cache, batch_size=6, accum_steps=4)
    with pytest.raises(
        TrainingError, match=r"batch_size 6 must be a multiple of processes \(1\) x accum_steps \(4\)"
    ):
        train(config, tmp_path / "api")
    assert not cache.exists() or not any(cache.iterdir())  # no video was decoded
    args = ["train", "--config", str(_config_file(config, tmp_path)), "--out", str(tmp_path / "cli")]
    line = _cli_error([*args, "--batch-size", "6", "--accum-steps", "4"])
    assert "must be a multiple of processes (1) x accum_steps (4)" in line


def test_batch_larger_than_an_epoch_says_lower_the_batch(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, batch_size=4096)
    with pytest.raises(ConfigError, match="fewer than one global batch of 4096") as caught:
        train(config, tmp_path / "run")
    assert "lower --batch-size or add videos" in str(caught.value)
    args = ["train", "--config", str(_config_file(config, tmp_path)), "--out", str(tmp_path / "cli")]
    assert "lower --batch-size" in _cli_error(args)


def test_accum_steps_beyond_an_epoch_is_a_training_error(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, batch_size=64, accum_steps=32)  # 28 micro-batches per epoch
    with pytest.raises(TrainingError, match=r"An epoch holds \d+ micro-batches, fewer than accum_steps"):
        train(config, tmp_path / "run")
    assert not (tmp_path / "run" / CHECKPOINT_NAME).exists()


# --- the data folder ----------------------------------------------------------------------------------------


def test_data_folder_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    line = _cli_error(["train", "--preset", "tiny-cpu", "--data", str(missing), "--out", str(tmp_path / "r")])
    assert f"--data {missing}: not a folder" in line and "folder of videos or frame folders" in line


def test_data_folder_without_videos_lists_the_extensions(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("no videos here")
    with pytest.raises(DataError, match="no video files") as caught:
        train(tiny_config(empty, tmp_path / "cache"), tmp_path / "run")
    assert ".mp4" in str(caught.value) and "frame folders" in str(caught.value)
    line = _cli_error(["train", "--preset", "tiny-cpu", "--data", str(empty), "--out", str(tmp_path / "cli")])
    assert f"--data {empty}: no video files" in line


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: p.write_bytes(b"not a video at all"), "the file is corrupt or not a video"),
        (write_audio_only, "holds no video stream"),
    ],
    ids=["corrupt", "audio-only"],
)
def test_undecodable_video_names_the_file(make, words: str, tmp_path: Path) -> None:
    folder = tmp_path / "videos"
    write_mp4(folder / "good.mp4", 24, seed=0)
    make(folder / "bad.mp4")
    config = tiny_config(folder, tmp_path / "cache")
    with pytest.raises(DecodeError, match=words) as caught:
        train(config, tmp_path / "run")
    assert str(folder / "bad.mp4") in str(caught.value)
    assert isinstance(caught.value, PlstitchError)
    line = _cli_error(
        ["train", "--config", str(_config_file(config, tmp_path)), "--out", str(tmp_path / "cli")]
    )
    assert "bad.mp4" in line and words in line


def test_videos_shorter_than_a_clip_say_raise_fps_or_lower_clip_len(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, clip_len=40, max_step=1)  # the videos hold 24 and 32 frames
    with pytest.raises(DataError, match="No training video has at least 40 frames at 4.0 fps") as caught:
        train(config, tmp_path / "run")
    assert "raise --fps or lower --clip-len" in str(caught.value)
    args = ["train", "--config", str(_config_file(config, tmp_path)), "--out", str(tmp_path / "cli")]
    assert "lower --clip-len" in _cli_error(args)


# --- the config file ----------------------------------------------------------------------------------------


def test_unreadable_config_file_names_it(tmp_path: Path) -> None:
    bad = tmp_path / "train_config.json"
    bad.write_text("{not json")
    line = _cli_error(["train", "--config", str(bad), "--out", str(tmp_path / "run")])
    assert f"--config {bad}: cannot read a training config" in line


def test_folder_with_our_files_but_no_run_is_refused(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / LOG_NAME).write_text('{"step": 1}\n')
    config = tiny_config(video_dir, frame_cache)
    with pytest.raises(TrainingError, match=r"neither train_config\.json nor last\.ckpt") as caught:
        train(config, run)
    assert "choose another --out, or --overwrite" in str(caught.value)
    line = _cli_error(["train", "--config", str(_config_file(config, tmp_path)), "--out", str(run)])
    assert str(run) in line and "--overwrite" in line
