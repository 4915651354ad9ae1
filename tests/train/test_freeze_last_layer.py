"""`freeze_last_layer_epochs`: the iBOT heads' last layer(s) get no update during the first N epochs
(DINO/iBOT `cancel_gradients_last_layer`), and are updated from the first step of epoch N on."""

from __future__ import annotations

from pathlib import Path

import torch

from plstitch_eval.hub.run_folder import CHECKPOINT_NAME
from plstitch_train.model import PLStitchModel
from plstitch_train.trainer import load_training_checkpoint, seed_everything, train
from tests.train.conftest import tiny_config

BATCH = 16  # (24 + 32) frames // 16 = 3 optimizer steps per epoch
STEPS_PER_EPOCH = 3
FROZEN_EPOCHS = 2


def _state(run_dir: Path) -> tuple[int, dict[str, torch.Tensor]]:
    checkpoint = load_training_checkpoint(run_dir / CHECKPOINT_NAME)
    return int(checkpoint["step"]), checkpoint["model"]


def test_last_layer_is_frozen_until_epoch_n_then_updated(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(
        video_dir, frame_cache, batch_size=BATCH, epochs=3, freeze_last_layer_epochs=FROZEN_EPOCHS
    )
    # The initial weights, built as the trainer builds them (same seed, same constructor).
    seed_everything(config.seed)
    initial_model = PLStitchModel(config)
    initial = {k: v.detach().clone() for k, v in initial_model.state_dict().items()}
    last_ids = {id(p) for p in initial_model.last_layer_parameters()}
    last_names = {n for n, p in initial_model.named_parameters() if id(p) in last_ids}
    assert any(".last_layer." in n for n in last_names) and any(".last_layer2." in n for n in last_names)
    trainable_last = {n for n, p in initial_model.named_parameters() if id(p) in last_ids and p.requires_grad}
    assert trainable_last and all(n.startswith("student.") for n in trainable_last)
    others = [
        n
        for n, p in initial_model.named_parameters()
        if p.requires_grad and id(p) not in last_ids and n.startswith("student.backbone.")
    ]

    # Last step of epoch N-1 (optimizer step index N * steps_per_epoch - 1): still frozen.
    train(config, tmp_path, stop_after=FROZEN_EPOCHS * STEPS_PER_EPOCH)
    step, frozen = _state(tmp_path)
    assert step == FROZEN_EPOCHS * STEPS_PER_EPOCH
    for name in sorted(last_names):
        torch.testing.assert_close(frozen[name], initial[name], rtol=0, atol=0, msg=name)
    assert any(not torch.equal(frozen[n], initial[n]) for n in others)  # the rest did train

    # First step of epoch N: the student's last layers move.
    train(resume=tmp_path / CHECKPOINT_NAME, stop_after=FROZEN_EPOCHS * STEPS_PER_EPOCH + 1)
    step, updated = _state(tmp_path)
    assert step == FROZEN_EPOCHS * STEPS_PER_EPOCH + 1
    moved = {n for n in trainable_last if not torch.equal(updated[n], frozen[n])}
    assert moved == trainable_last
    for name in trainable_last:
        assert torch.isfinite(updated[name]).all()


def test_no_freezing_updates_the_last_layer_at_the_first_step(
    video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, batch_size=BATCH, epochs=1, freeze_last_layer_epochs=0)
    seed_everything(config.seed)
    initial_model = PLStitchModel(config)
    last_ids = {id(p) for p in initial_model.last_layer_parameters()}
    trainable_last = {
        n: p.detach().clone()
        for n, p in initial_model.named_parameters()
        if id(p) in last_ids and p.requires_grad
    }
    train(config, tmp_path, stop_after=1)
    _, state = _state(tmp_path)
    assert all(not torch.equal(state[n], value) for n, value in trainable_last.items())
