"""Trainer: exact resume, output that load_encoder reads, checkpoints readable with weights_only, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from plstitch_eval.errors import TrainingError
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, LOG_NAME, TRAIN_CONFIG_NAME
from plstitch_train.model import PLStitchModel
from plstitch_train.presets import TrainConfig
from plstitch_train.trainer import load_training_checkpoint, train
from tests.train.conftest import VIDEO_FRAMES, assert_states_close, tiny_config

STEPS = 4
BATCH = 16  # an epoch = every training frame once: (24 + 32) frames // 16 = 3 steps, so 4 steps cross one


@pytest.fixture(scope="module")
def full_run(video_dir: Path, frame_cache: Path, tmp_path_factory: pytest.TempPathFactory):
    """An uninterrupted 4-step run (one epoch of 3 steps, then one step) with every branch on."""
    config = tiny_config(video_dir, frame_cache, max_steps=STEPS, batch_size=BATCH)
    return config, train(config, tmp_path_factory.mktemp("full"))


def _model_state(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_training_checkpoint(run_dir / CHECKPOINT_NAME)["model"]


def test_resume_reproduces_uninterrupted_run_exactly(full_run, tmp_path: Path) -> None:
    config, result = full_run
    assert result.step == STEPS == result.total_steps
    stopped = train(config, tmp_path, stop_after=1)  # "killed" after one step, mid-epoch
    assert stopped.step == 1 and not (tmp_path / "backbone").exists()
    resumed = train(resume=tmp_path / CHECKPOINT_NAME)
    assert resumed.step == STEPS
    expected, got = _model_state(result.out_dir), _model_state(tmp_path)
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
    log = [json.loads(line) for line in (tmp_path / LOG_NAME).read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, STEPS + 1))  # no step logged twice
    # the resumed run logged the same losses for the steps it ran
    for before, after in zip(result.history[1:], resumed.history, strict=True):
        assert before["loss"] == after["loss"]


def test_checkpoint_holds_everything_and_loads_weights_only(full_run) -> None:
    config, result = full_run
    checkpoint = torch.load(result.out_dir / CHECKPOINT_NAME, map_location="cpu", weights_only=True)
    assert {"config", "model", "optimizer", "scaler", "rng", "sampler", "step"} <= checkpoint.keys()
    assert checkpoint["step"] == STEPS
    frames = sum(VIDEO_FRAMES)
    assert checkpoint["sampler"] == {
        "epoch": STEPS // (frames // BATCH),
        "batch": STEPS % (frames // BATCH),
        "seed": 0,
    }
    assert set(checkpoint["rng"][0]) >= {"torch", "numpy", "python"}
    assert TrainConfig.from_dict(checkpoint["config"]).max_steps == STEPS
    log = [json.loads(line) for line in (result.out_dir / LOG_NAME).read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, STEPS + 1))
    assert {"vid", "mim", "jigsaw", "lr", "samples_per_s"} <= log[0].keys()
    saved = json.loads((result.out_dir / TRAIN_CONFIG_NAME).read_text())
    assert saved == config.to_dict() and checkpoint["config"] == config.to_flat_dict()  # nested; flat


def test_output_loads_with_load_encoder_and_matches_teacher(full_run) -> None:
    from plstitch_eval.hub import load_encoder

    config, result = full_run
    model = PLStitchModel(config.replace(init=None))
    model.load_state_dict(_model_state(result.out_dir))
    teacher = model.teacher["backbone"].eval()
    images = torch.randn(3, 3, config.img_size, config.img_size)
    with torch.no_grad():
        expected = teacher(images)[:, 0]
    for spec in (result.out_dir, result.out_dir / "backbone"):
        encoder = load_encoder(str(spec))
        assert encoder.feature_dim == expected.shape[1]
        with torch.no_grad():
            torch.testing.assert_close(encoder(images), expected, rtol=1e-5, atol=1e-5)
    from plstitch_eval.hub.ranking_head import load_temporal_head

    head = load_temporal_head(result.out_dir / "backbone")
    assert torch.equal(head.scorer[0].weight, model.student["temporal_head"].scorer[0].weight)


def test_resume_rejects_a_file_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    bogus = tmp_path / CHECKPOINT_NAME
    torch.save({"hello": torch.zeros(1)}, bogus)
    with pytest.raises(TrainingError, match="no training state") as caught:
        train(resume=bogus)
    assert f"Cannot read {bogus} as a training checkpoint" in str(caught.value)
    torch.save({"format": 99, "step": 3}, bogus)  # a checkpoint of a newer trainer names both formats
    with pytest.raises(TrainingError, match="checkpoint format 99; this version reads 1"):
        train(resume=bogus)


def test_non_finite_loss_is_a_training_error_and_one_cli_line(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    config = tiny_config(video_dir, frame_cache, lambda_mim=0.0, lambda_jigsaw=0.0)
    with pytest.raises(TrainingError, match="Non-finite loss"):
        train(config.replace(base_lr=1e38), tmp_path / "api")
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    args = ["train", "--config", str(config_file), "--out", str(tmp_path / "cli"), "--lr", "1e38"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "Non-finite loss" in result.output and "Traceback" not in result.output


def test_gradient_accumulation_matches_the_full_batch(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    # MIM is off: its centre EMA is updated per micro-batch, which legitimately differs from one full batch
    config = tiny_config(video_dir, frame_cache, max_steps=2, lambda_mim=0.0)
    whole = train(config, tmp_path / "whole")
    accumulated = train(config.replace(accum_steps=2), tmp_path / "accum")
    assert accumulated.history[-1]["loss"] == pytest.approx(whole.history[-1]["loss"], rel=1e-4)
    expected, got = _model_state(whole.out_dir), _model_state(accumulated.out_dir)
    assert_states_close(expected, got)


def test_init_from_an_encoder_spec_copies_its_weights(full_run) -> None:
    config, result = full_run
    model = PLStitchModel(config.replace(init=str(result.out_dir)))
    exported = load_training_checkpoint(result.out_dir / CHECKPOINT_NAME)["model"]
    for name, value in model.student["backbone"].vit.state_dict().items():
        assert torch.equal(value, exported[f"teacher.backbone.vit.{name}"]), name
        assert torch.equal(model.teacher["backbone"].vit.state_dict()[name], value)


@pytest.mark.parametrize("name", ["paper-vitb16", "ablation-vits16", "tiny-cpu"])
def test_presets_round_trip_and_validate(name: str) -> None:
    from plstitch_eval.errors import ConfigError
    from plstitch_train.presets import get_preset

    config = get_preset(name).replace(data="videos")
    assert TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config.validate()
    with pytest.raises(ConfigError, match="objective"):
        config.replace(objective="listnet").validate()
    with pytest.raises(ConfigError, match="exactly one data source"):
        config.replace(dataset="cholec80").validate()
    with pytest.raises(ConfigError, match="Unknown training settings"):
        TrainConfig.from_dict({**config.to_dict(), "lamda_vid": 1.0})


def test_dataloader_workers_do_not_change_the_run(full_run, tmp_path: Path) -> None:
    config, result = full_run
    with_workers = train(config.replace(num_workers=2), tmp_path)
    expected, got = _model_state(result.out_dir), _model_state(tmp_path)
    assert all(torch.equal(expected[key], got[key]) for key in expected)
    assert [h["loss"] for h in with_workers.history] == [h["loss"] for h in result.history]


@pytest.mark.parametrize("frame_store", ["lmdb", "raw"])
def test_cli_says_what_it_prepares_before_the_first_step(
    frame_store: str, video_dir: Path, tmp_path: Path
) -> None:
    """Before the first step the log says, in order: which videos, that (and how many) are decoded with
    progress, what will be trained; the first step is logged at once, not only after `log_every` steps."""
    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    config = tiny_config(video_dir, tmp_path / "cache", max_steps=2, log_every=5, frame_store=frame_store)
    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    result = CliRunner().invoke(app, ["train", "--config", str(config_file), "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    text = "".join(result.stderr.split())  # rich wraps (even folds) long log lines: compare without spaces
    stages = [
        f"preparing data: listing the videos of {video_dir}",
        f"preparing data: decoding {len(VIDEO_FRAMES)} videos at 4 fps into",
        f"1/{len(VIDEO_FRAMES)} videos decoded",
        "training: 2 steps (",
        "step 1/2",
        "step 2/2",
    ]
    positions = [text.find("".join(stage.split())) for stage in stages]
    assert -1 not in positions, (stages[positions.index(-1)], text)
    assert positions == sorted(positions), text
