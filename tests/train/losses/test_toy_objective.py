"""A new L_vid objective is one registered class: a toy one, registered here only, trains a tiny model end to
end with no edit to the model (its own head, its own loss on the head's output)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import default_collate

from plstitch_eval.errors import ConfigError
from plstitch_train.config import TrainConfig
from plstitch_train.config.loss import ObjectiveFacts, objective_facts
from plstitch_train.data import FrameStore, TrainDataset, discover_videos
from plstitch_train.losses import Objective, objective_names, register_objective, unregister_objective
from plstitch_train.model import PLStitchModel
from plstitch_train.run.plan import comparable_settings
from plstitch_train.sampling import TrainSampler
from plstitch_train.trainer import train
from tests.train.conftest import tiny_config

TOY = "toy-first-before-last"


class ToyObjective(Objective):
    """Logistic loss that the first frame outscores the last: `mean_b softplus(s_last - s_first)`."""

    name = TOY
    head_name = "toy_head"

    def build_head(self, dim: int) -> nn.Module:
        """One linear score per frame: [B, k, D] -> [B, k]."""
        return nn.Sequential(nn.Linear(dim, 1), nn.Flatten(-2))

    def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
        return F.softplus(head_output[:, -1] - head_output[:, 0]).mean()


@pytest.fixture
def toy() -> Iterator[type[Objective]]:
    """The toy objective, registered for one test and unregistered after it."""
    register_objective(ToyObjective)
    try:
        yield ToyObjective
    finally:
        unregister_objective(TOY)
    assert TOY not in objective_names()


def _config(video_dir: Path, frame_cache: Path, **changes: object) -> TrainConfig:
    return tiny_config(video_dir, frame_cache, objective=TOY, lambda_mim=0.0, lambda_jigsaw=0.0, **changes)


def _batch(config: TrainConfig) -> dict[str, Tensor]:
    videos = discover_videos(config.data, config.fps)
    store = FrameStore.build(videos, config.fps, config.frame_size, Path(config.cache_dir), config.clip_len)
    sampler = TrainSampler(
        store.lengths,
        batch_size=4,
        clip_len=config.clip_len,
        max_step=config.max_step,
        fps=config.fps,
        context_seconds=config.context_seconds,
        counts=(4, 4, 4),
    )
    dataset = TrainDataset(store, config.img_size, (4, 4), config.mask_ratio)
    return default_collate([dataset[spec] for spec in next(iter(sampler))])


def test_the_toy_objective_builds_its_head_and_its_loss_is_the_one_trained(
    toy: type[Objective], video_dir: Path, frame_cache: Path
) -> None:
    torch.manual_seed(0)
    model = PLStitchModel(_config(video_dir, frame_cache)).train()
    assert "toy_head" in model.student and "temporal_head" not in model.student
    assert isinstance(model.objective, toy)

    scores: list[Tensor] = []
    model.student["toy_head"].register_forward_hook(lambda module, args, out: scores.append(out))
    out = model(_batch(model.config))
    assert set(out) == {"vid", "loss"} and len(scores) == 1 and scores[0].shape == (4, 4)
    first, last = scores[0][:, 0].detach().double(), scores[0][:, -1].detach().double()
    expected = torch.log1p(torch.exp(last - first)).mean()  # softplus written out, in float64
    assert math.isclose(float(out["vid"].detach()), float(expected), rel_tol=1e-5)
    assert torch.equal(out["loss"], model.config.lambda_vid * out["vid"])

    optimizer = torch.optim.SGD([p for p in model.student.parameters() if p.requires_grad], lr=0.1)
    before = {name: p.detach().clone() for name, p in model.student.named_parameters()}
    out["loss"].backward()
    head_grad = model.student["toy_head"][0].weight.grad
    backbone_grad = model.student["backbone"].vit.blocks[0].attn.qkv.weight.grad
    assert head_grad is not None and float(head_grad.abs().sum()) > 0
    assert backbone_grad is not None and float(backbone_grad.abs().sum()) > 0  # L_vid reaches the backbone
    optimizer.step()
    after = dict(model.student.named_parameters())
    assert not torch.equal(after["toy_head.0.weight"], before["toy_head.0.weight"])


def test_the_trainer_runs_a_step_of_the_toy_objective(
    toy: type[Objective], video_dir: Path, frame_cache: Path, tmp_path: Path
) -> None:
    result = train(_config(video_dir, frame_cache, max_steps=1), tmp_path / "run")
    assert result.step == 1
    (record,) = result.history
    assert math.isfinite(record["vid"]) and record["loss"] == pytest.approx(record["vid"])
    assert "mim" not in record and "jigsaw" not in record


def test_an_unregistered_toy_name_is_refused_by_the_config(video_dir: Path, frame_cache: Path) -> None:
    with pytest.raises(ConfigError, match=f"objective '{TOY}' unknown; use one of pl, pairwise, permutation"):
        _config(video_dir, frame_cache)


def _refuse_long_clips(config: TrainConfig) -> None:
    if config.sampling.clip_len > 4:
        raise ConfigError(f"toy-strict needs clip_len <= 4 (got {config.sampling.clip_len})")


class StrictToy(ToyObjective):
    """The toy with facts of its own: a setting only it reads and its own check of the whole config."""

    name = "toy-strict"
    facts = ObjectiveFacts(("permutation_classes",), _refuse_long_clips)


def test_an_objectives_facts_are_its_own_config_check_and_settings(tmp_path: Path) -> None:
    """No branch on an objective's name outside it: its `facts` check a TrainConfig that trains it, and the
    settings only it reads are ignored when another objective's runs are compared."""
    register_objective(StrictToy)
    try:
        with pytest.raises(ConfigError, match="toy-strict needs clip_len <= 4 \\(got 8\\)"):
            TrainConfig(objective="toy-strict", clip_len=8)
        assert TrainConfig(objective="toy-strict", clip_len=4).clip_len == 4
        TrainConfig(objective="pl", clip_len=8)  # another objective's check does not run
        pl = comparable_settings(TrainConfig(objective="pl").to_dict())
        assert "permutation_classes" not in pl and "permutation_head" not in pl
        strict = comparable_settings(TrainConfig(objective="toy-strict", clip_len=4).to_dict())
        assert "permutation_classes" in strict and "permutation_head" not in strict
    finally:
        unregister_objective("toy-strict")
    assert objective_facts("toy-strict") == ObjectiveFacts()
