"""Presets: the paper's numbers, the authors' script where the paper is silent, auto temporal-head widths."""

from __future__ import annotations

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train.presets import PRESETS, TrainConfig, get_preset
from plstitch_train.reproduce import ReproduceConfig, get_reproduce_preset, train_config

# Paper (main text + supplement) where it states a number; else the authors' scripts/pretrain_lmdb.sh and the
# argparse defaults of main_pl_lmdb.py. Written out here, independently of presets.py.
PAPER_VITB16 = {
    "arch": "vit_base_patch16_224",
    "img_size": 224,
    "fps": 1.0,  # paper: image branch at 1 fps
    "clip_len": 8,  # paper: k = 8
    "min_step": 1,  # authors' Temporal_RandStep_dataset
    "max_step": 20,
    "clip_length_bounds": (240, 960),
    "clips_per_video": (60, 200, 300),
    "context_seconds": (1.5, 2.5),  # paper
    "mask_ratio": 0.3,  # paper
    "lambda_vid": 1.0,
    "lambda_mim": 1.0,
    "lambda_jigsaw": 0.4,  # paper
    "jigsaw_start_epoch": 6.0,  # authors: --start_epoch_puzzle 6, half-cosine over one epoch
    "jigsaw_ramp_epochs": 1.0,
    "epochs": 30,  # paper (LEMON)
    "warmup_epochs": 3.0,  # paper
    "batch_size": 240,  # paper
    "base_lr": 4e-4,  # paper; scaled by batch / 256 as in the authors' code
    "min_lr": 1e-6,  # authors
    "weight_decay": 0.04,  # authors' cosine 0.04 -> 0.4 (the supplement says 0.05)
    "weight_decay_end": 0.4,
    "momentum_teacher": 0.998,  # authors' script
    "clip_grad": 3.0,  # authors, per parameter
    "clip_per_parameter": True,
    "drop_path": 0.1,
    "freeze_last_layer_epochs": 1,
    "ibot_out_dim": 8192,
    "ibot_hidden_dim": 2048,
    "ibot_bottleneck_dim": 256,
    "student_temp": 0.1,
    "teacher_temp": 0.04,
    "warmup_teacher_temp": 0.04,
    "teacher_patch_temp": 0.07,
    "warmup_teacher_patch_temp": 0.04,
    "warmup_teacher_temp_epochs": 3,  # authors' default
    "temporal_dim": 0,  # auto = D/2 (hidden_mul 0.5)
    "temporal_ff": 0,  # auto = 4 x hidden
    "temporal_layers": 6,
    "temporal_heads": 8,
    "temporal_dropout": 0.1,
    "jigsaw_heads": 0,  # auto = 12 for D=768 else 8
    "objective": "pl",
}


def test_paper_vitb16_has_the_paper_and_authors_numbers() -> None:
    config = get_preset("paper-vitb16")
    got = {key: getattr(config, key) for key in PAPER_VITB16}
    assert got == PAPER_VITB16


def test_cooking_and_ablation_presets_differ_from_the_paper_preset_only_where_the_paper_says() -> None:
    paper = get_preset("paper-vitb16").to_flat_dict()
    cooking = get_preset("paper-vitb16-cooking").to_flat_dict()
    ablation = get_preset("ablation-vits16").to_flat_dict()
    assert {k: v for k, v in cooking.items() if paper[k] != v} == {"epochs": 100, "warmup_epochs": 10.0}
    assert {k: v for k, v in ablation.items() if paper[k] != v} == {"arch": "vit_small_patch16_224"}


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_uses_the_auto_temporal_head_width(name: str) -> None:
    config = get_preset(name)
    assert (config.temporal_dim, config.temporal_ff) == (0, 0)


def test_temporal_widths_are_validated_on_construction() -> None:
    for changes in ({"temporal_dim": -1}, {"temporal_ff": -4}):
        with pytest.raises(ConfigError, match="temporal_dim and temporal_ff"):
            TrainConfig(**changes)
        with pytest.raises(ConfigError, match="temporal_dim and temporal_ff"):
            get_preset("tiny-cpu").replace(**changes)
        with pytest.raises(ConfigError, match="temporal_dim and temporal_ff"):
            TrainConfig.from_dict({**TrainConfig().to_flat_dict(), **changes})


def test_data_source_is_checked_by_validate_not_on_construction() -> None:
    config = get_preset("paper-vitb16")  # a preset names no data yet
    with pytest.raises(ConfigError, match="exactly one data source"):
        config.validate()
    assert config.replace(data="videos").validate().data == "videos"


def test_permutation_objective_needs_at_most_eight_frames_on_construction() -> None:
    message = r"permutation classification needs 1 <= clip_len <= 8 \(got 9"
    with pytest.raises(ConfigError, match=message):
        get_preset("paper-vitb16").replace(objective="permutation", clip_len=9)
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_dict({**TrainConfig().to_flat_dict(), "objective": "permutation", "clip_len": 9})
    # a long-clip config may switch to the permutation objective when one replace also shortens the clip
    long_clips = TrainConfig(clip_len=16)
    assert long_clips.replace(objective="permutation", clip_len=8).clip_len == 8
    assert get_preset("tiny-cpu").replace(objective="permutation").objective == "permutation"


def test_cadence_workers_and_step_cap_are_validated_on_construction() -> None:
    for changes, field in (
        ({"checkpoint_every": 0}, "checkpoint_every"),
        ({"log_every": 0}, "log_every"),
        ({"num_workers": -1}, "num_workers"),
        ({"max_steps": 0}, "max_steps"),
    ):
        with pytest.raises(ConfigError, match=field):
            get_preset("tiny-cpu").replace(**changes)


def test_train_command_refuses_a_long_permutation_clip_before_reading_data(tmp_path) -> None:
    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    missing = tmp_path / "no-such-videos"
    args = ["train", "--preset", "tiny-cpu", "--data", str(missing), "--out", str(tmp_path / "run")]
    result = CliRunner().invoke(app, [*args, "--objective", "permutation", "--clip-len", "9"])
    assert result.exit_code == 1
    assert "clip_len <= 8" in result.output and "no-such-videos" not in result.output
    assert not (tmp_path / "run").exists()


def test_tiny_cpu_synthetic_is_the_reproduction_pl_row_of_seed_0() -> None:
    """The README's training example trains what `reproduce --preset synthetic` trains as its PL-Stitch row
    (seed 0): tiny-cpu with the synthetic settings, 6 epochs, from the shipped MIM initialisation."""
    reproduction = train_config(ReproduceConfig(get_reproduce_preset("synthetic")), "pl", seed=0)
    reproduced = reproduction.to_flat_dict()
    mine = get_preset("tiny-cpu-synthetic").to_flat_dict()
    where_it_runs = {"dataset", "split", "cache_dir", "device"}  # the command line's, not the preset's
    differing = {k for k in mine if mine[k] != reproduced[k]}
    assert differing <= where_it_runs, {k: (mine[k], reproduced[k]) for k in differing - where_it_runs}
    assert mine["init"] == "ibot-tiny-synthetic" and mine["epochs"] == 6
    assert mine["lambda_vid"] > 0 and mine["lambda_jigsaw"] > 0
