"""`objective_gradient_scale`: per-branch loss and backbone gradient norm of lambda * loss at a start."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

from plstitch_train.data import build_training_data, open_frame_store
from plstitch_train.gradient_scale import branch_gradient_norms, objective_gradient_scale
from plstitch_train.losses import pl_loss_per_item
from plstitch_train.model import PLStitchModel
from plstitch_train.presets import TrainConfig
from plstitch_train.run.rng import seed_everything
from tests.train.conftest import tiny_config

VID_ONLY = {"lambda_mim": 0.0, "lambda_jigsaw": 0.0}


def first_batch(
    config: TrainConfig, cache: Path, seed: int, grid: tuple[int, int]
) -> dict[str, torch.Tensor]:
    """The first batch the run's own pipeline yields with sampler seed `seed` (written here, not imported)."""
    data = build_training_data(config.with_changes(seed=seed), open_frame_store(config, cache), grid)
    return default_collate([data.dataset[spec] for spec in next(iter(data.sampler))])


def test_vid_norms_match_an_independent_autograd(video_dir: Path, frame_cache: Path) -> None:
    config = tiny_config(video_dir, frame_cache, seed=3, lambda_vid=0.7, **VID_ONLY)
    got = objective_gradient_scale(config, n_batches=1, seed=5)

    seed_everything(3)
    model = PLStitchModel(config).train()
    batch = first_batch(config, frame_cache, 5, model.student["backbone"].grid_size)
    clip = batch["clip"]
    backbone = model.student["backbone"]
    params = [p for p in backbone.parameters() if p.requires_grad]
    feats = backbone(clip.flatten(0, 1))[:, 0].reshape(*clip.shape[:2], -1)
    loss = pl_loss_per_item(model.student["temporal_head"](feats))
    grads = torch.autograd.grad(0.7 * loss, [feats, *params], allow_unused=True)
    backbone_norm = torch.sqrt(sum(g.double().pow(2).sum() for g in grads[1:] if g is not None))

    vid = got["branches"]["vid"]
    assert got["n_batches"] == 1 and got["seed"] == 5 and got["objective"] == "pl" and got["clip_len"] == 4
    assert vid["weight"] == 0.7 and vid["backbone_grad_norm_std"] == 0.0
    assert vid["loss"] == pytest.approx(float(loss.detach()), rel=1e-6)
    assert vid["backbone_grad_norm"] == pytest.approx(float(backbone_norm), rel=1e-5)
    assert vid["feature_grad_norm"] == pytest.approx(float(grads[0].norm()), rel=1e-5)
    assert vid["backbone_grad_norm"] > 0 and vid["feature_grad_norm"] > 0


def test_doubling_the_weight_doubles_the_norms_not_the_loss(video_dir: Path, frame_cache: Path) -> None:
    one = tiny_config(video_dir, frame_cache, lambda_vid=1.0, **VID_ONLY)
    base = objective_gradient_scale(one, n_batches=2)["branches"]["vid"]
    doubled = objective_gradient_scale(one.replace(lambda_vid=2.0), n_batches=2)["branches"]["vid"]
    assert doubled["loss"] == pytest.approx(base["loss"], rel=1e-6)
    assert doubled["weight"] == 2.0
    for key in ("backbone_grad_norm", "backbone_grad_norm_std", "feature_grad_norm"):
        assert doubled[key] == pytest.approx(2 * base[key], rel=1e-5), key


def test_leaves_weights_buffers_and_rng_unchanged(
    video_dir: Path, frame_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tiny_config(video_dir, frame_cache)  # every branch: the iBOT centre is a buffer it would move
    built: list[PLStitchModel] = []

    class Recorded(PLStitchModel):
        def __init__(self, config: TrainConfig) -> None:
            super().__init__(config)
            built.append(self)

    monkeypatch.setattr("plstitch_train.gradient_scale.PLStitchModel", Recorded)
    torch.manual_seed(123)
    np.random.seed(4)
    random.seed(5)
    before = (torch.get_rng_state(), np.random.get_state(), random.getstate())
    objective_gradient_scale(config, n_batches=2)
    after = (torch.rand(4), np.random.rand(2), random.random())
    torch.set_rng_state(before[0])
    np.random.set_state(before[1])
    random.setstate(before[2])
    assert torch.equal(after[0], torch.rand(4))
    assert np.array_equal(after[1], np.random.rand(2)) and after[2] == random.random()

    (model,) = built
    seed_everything(config.run.seed)
    fresh = PLStitchModel(config).state_dict()
    state = model.state_dict()
    assert state.keys() == fresh.keys()
    for key, value in fresh.items():
        assert torch.equal(state[key], value), key
    assert all(p.grad is None for p in model.parameters())


def test_branch_norms_leave_a_given_model_untouched(video_dir: Path, frame_cache: Path) -> None:
    config = tiny_config(video_dir, frame_cache)
    model = PLStitchModel(config).train()
    batch = first_batch(config, frame_cache, 0, model.student["backbone"].grid_size)
    before = {key: value.clone() for key, value in model.state_dict().items()}
    for branch in ("vid", "mim", "jigsaw"):
        out = branch_gradient_norms(model, batch, branch, 0.5)
        assert out["backbone_grad_norm"] > 0 and ("feature_grad_norm" in out) == (branch == "vid")
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert all(p.grad is None for p in model.parameters())


def test_the_objective_is_the_one_measured(video_dir: Path, frame_cache: Path) -> None:
    config = tiny_config(video_dir, frame_cache, **VID_ONLY)
    pl = objective_gradient_scale(config, n_batches=1)
    pairwise = objective_gradient_scale(config.replace(objective="pairwise"), n_batches=1)
    assert pl["objective"] == "pl" and pairwise["objective"] == "pairwise"
    pl_vid, pairwise_vid = pl["branches"]["vid"], pairwise["branches"]["vid"]
    assert pl_vid["backbone_grad_norm"] != pytest.approx(pairwise_vid["backbone_grad_norm"], rel=1e-3)
    assert pl_vid["loss"] != pytest.approx(pairwise_vid["loss"], rel=1e-3)


def test_only_active_branches_are_reported(video_dir: Path, frame_cache: Path) -> None:
    vid_jigsaw = objective_gradient_scale(tiny_config(video_dir, frame_cache, lambda_mim=0.0), n_batches=1)
    assert set(vid_jigsaw["branches"]) == {"vid", "jigsaw"}
    assert vid_jigsaw["branches"]["jigsaw"]["weight"] == 0.4  # full weight: the ramp is ignored
    assert "feature_grad_norm" not in vid_jigsaw["branches"]["jigsaw"]
    mim = objective_gradient_scale(tiny_config(video_dir, frame_cache, lambda_vid=0.0, lambda_jigsaw=0.0))
    assert set(mim["branches"]) == {"mim"} and mim["n_batches"] == 8
