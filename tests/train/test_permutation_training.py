"""The permutation-classification baseline trained end to end: the temporal trunk (default) and a sampled set
of classes at clip_len 8 and above; its run folder resumes strictly and exports without a temporal head."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub.ranking_head import HEAD_CONFIG_FILE, HEAD_WEIGHTS_FILE, load_temporal_head
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME
from plstitch_train.config import TrainConfig
from plstitch_train.model import PLStitchModel
from plstitch_train.publishing.export import export_model
from plstitch_train.trainer import load_training_checkpoint, train
from tests.train.conftest import tiny_config

# the L_vid branch alone, so the runs stay small; the heads' sizes are the tiny config's temporal head's
ONLY_VID = {"objective": "permutation", "lambda_mim": 0.0, "lambda_jigsaw": 0.0, "batch_size": 4}


def test_a_temporal_trunk_run_trains_resumes_strictly_and_exports_without_a_temporal_head(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=2, **ONLY_VID)
    assert (config.permutation_head, config.permutation_classes) == ("temporal", 0)  # the defaults
    run_dir = tmp_path / "run"
    assert train(config, run_dir, stop_after=1).step == 1
    resumed = train(resume=run_dir / CHECKPOINT_NAME)  # rebuilds the model, loads last.ckpt strictly
    assert resumed.step == 2 and all(torch.isfinite(torch.tensor(h["loss"])) for h in resumed.history)

    checkpoint = load_training_checkpoint(run_dir / CHECKPOINT_NAME)
    head_keys = {k for k in checkpoint["model"] if k.startswith("student.permutation_head.")}
    assert "student.permutation_head.reduce.0.weight" in head_keys
    assert "student.permutation_head.temporal.enc.layers.0.linear1.weight" in head_keys
    assert checkpoint["model"]["student.permutation_head.classifier.weight"].shape == (
        24,
        4 * 32,
    )  # 4! x k*hidden
    assert not any("temporal_head" in k or "scorer" in k for k in checkpoint["model"])
    model = PLStitchModel(TrainConfig.from_dict(checkpoint["config"]))
    model.load_state_dict(checkpoint["model"], strict=True)

    # the permutation trunk is no PL temporal head: neither the run nor its export pretends to have one
    assert not (run_dir / "backbone" / HEAD_CONFIG_FILE).exists()
    with pytest.raises(CheckpointError, match="holds no temporal head"):
        load_temporal_head(run_dir / CHECKPOINT_NAME)
    for source in (run_dir, run_dir / CHECKPOINT_NAME):
        exported = export_model(source, tmp_path / f"export-{source.name}")
        assert (exported / "model.safetensors").is_file() and not (exported / HEAD_WEIGHTS_FILE).exists()


def test_a_sampled_set_of_classes_trains_at_clip_len_8(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=2, clip_len=8, permutation_classes=64, **ONLY_VID)
    result = train(config, tmp_path / "run")
    assert result.step == 2 and all(torch.isfinite(torch.tensor(h["vid"])) for h in result.history)
    state = load_training_checkpoint(tmp_path / "run" / CHECKPOINT_NAME)["model"]
    assert state["student.permutation_head.classifier.weight"].shape == (64, 8 * 32)  # 64 classes, not 8!


def test_the_video_loss_of_a_sampled_set_above_8_frames_reaches_every_head_parameter(
    video_dir: Path, frame_cache: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, clip_len=8, permutation_classes=100, **ONLY_VID)
    config.sampling.clip_len = 10  # unchecked in-place change: TrainConfig itself allows clip_len <= 8 only
    torch.manual_seed(0)
    model = PLStitchModel(config).train()
    head = model.student["permutation_head"]
    assert (head.k, head.n_classes, head.kind) == (10, 100, "temporal")
    loss = model.video_loss(torch.randn(2, 10, 3, 32, 32))
    assert 0 < loss.item() < 3 * math.log(100)  # cross-entropy over 100 classes, near log(100) at init
    loss.backward()
    assert all(p.grad is not None for p in head.parameters())  # DDP needs every parameter used


def test_the_linear_head_is_the_old_one(video_dir: Path, frame_cache: Path) -> None:
    config = tiny_config(video_dir, frame_cache, permutation_head="linear", **ONLY_VID)
    head = PLStitchModel(config).student["permutation_head"]
    assert {name: p.shape for name, p in head.named_parameters()} == {
        "classifier.weight": (24, 4 * 32),  # 4! classes over 4 concatenated 32-d embeddings
        "classifier.bias": (24,),
    }
