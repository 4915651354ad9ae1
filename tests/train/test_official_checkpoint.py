"""`--init` from a released PL-Stitch checkpoint (tiny, authors' layout): every tensor, then training."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from plstitch_eval.errors import CheckpointError
from plstitch_eval.utils.console import logger
from plstitch_train.model import PLStitchModel
from plstitch_train.trainer import train
from tests.official import (
    IBOT,
    TINY,
    official_checkpoint,
    reference_jigsaw_scores,
    reference_temporal_scores,
    serve_from_hf_cache,
    unwrap,
    write_official_checkpoint,
)
from tests.train.conftest import tiny_config


@pytest.fixture()
def official(tmp_path: Path) -> tuple[Path, dict]:
    path = tmp_path / "pl_tiny.pth"
    return path, write_official_checkpoint(path)


def _config(video_dir: Path, frame_cache: Path, **changes):
    """The tiny training config sized like the official tiny checkpoint (authors' head sizes: auto)."""
    sizes = {
        "model_args": {
            "patch_size": TINY["patch"],
            "embed_dim": TINY["dim"],
            "depth": TINY["depth"],
            "num_heads": TINY["vit_heads"],
        },
        "img_size": TINY["img"],
        "ibot_out_dim": IBOT["out_dim"],
        "ibot_hidden_dim": IBOT["hidden"],
        "ibot_bottleneck_dim": IBOT["bottleneck"],
        "temporal_dim": 0,  # D/2
        "temporal_ff": 0,  # 4 x hidden
        "temporal_layers": 1,
        "temporal_heads": 8,
        "jigsaw_heads": 0,  # authors' rule
    }
    return tiny_config(video_dir, frame_cache, **(sizes | changes))


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture()
def log_messages():
    handler = _Records()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler.messages
    logger.removeHandler(handler)
    logger.setLevel(level)


def expected_tensors(checkpoint: dict) -> dict[str, torch.Tensor]:
    """Our model's state-dict names -> the file's tensors (the mapping written out by hand)."""
    weight_norm = {
        "weight_g": "parametrizations.weight.original0",
        "weight_v": "parametrizations.weight.original1",
    }

    def head_key(key: str) -> str:
        for old, new in weight_norm.items():
            key = key.replace(old, new)
        return key

    out = {}
    for branch in ("student", "teacher"):
        for key, value in unwrap(checkpoint[branch]).items():
            if key == "backbone.masked_embed":
                out[f"{branch}.backbone.masked_embed"] = value
            elif key.startswith("backbone."):
                out[f"{branch}.backbone.vit.{key.removeprefix('backbone.')}"] = value
            elif not (branch == "teacher" and key.startswith("head.last_layer2.")):  # shared alias
                out[f"{branch}.ibot_head.{head_key(key.removeprefix('head.'))}"] = value
    out |= {f"student.temporal_head.{k}": v for k, v in unwrap(checkpoint["temporal_head"]).items()}
    out |= {f"student.jigsaw_head.{k}": v for k, v in unwrap(checkpoint["puzzle_decoder"]).items()}
    out |= {f"ibot_loss.{k}": v for k, v in checkpoint["ibot_loss"].items()}
    return out


def test_init_loads_every_tensor_and_training_continues(
    official, video_dir: Path, frame_cache: Path, tmp_path: Path, log_messages
) -> None:
    path, checkpoint = official
    config = _config(video_dir, frame_cache, init=str(path), max_steps=2)
    model = PLStitchModel(config)
    state = model.state_dict()
    expected = expected_tensors(checkpoint)
    assert set(expected) == set(state)  # every tensor of the model comes from the file, and vice versa
    for key, value in expected.items():
        assert torch.equal(state[key], value), key
    # the loaded heads compute the authors' scores
    frames = torch.randn(2, 4, TINY["dim"])
    queries, context = torch.randn(2, 16, TINY["dim"]), torch.randn(2, 32, TINY["dim"])
    with torch.no_grad():
        torch.testing.assert_close(
            model.student["temporal_head"].eval()(frames),
            reference_temporal_scores(unwrap(checkpoint["temporal_head"]), frames, n_heads=8),
            atol=1e-5,
            rtol=1e-5,
        )
        torch.testing.assert_close(
            model.student["jigsaw_head"].eval()(queries, context),
            reference_jigsaw_scores(unwrap(checkpoint["puzzle_decoder"]), queries, context, n_heads=8),
            atol=1e-5,
            rtol=1e-5,
        )
    text = "\n".join(log_messages)
    assert "loaded student backbone + masked_embed" in text and "jigsaw_head (from puzzle_decoder)" in text
    assert "not used: optimizer" in text or "not used: args, epoch, optimizer" in text

    result = train(config, tmp_path / "run")  # the library entry point, 2 steps
    assert result.step == 2 and all(torch.isfinite(torch.tensor(h["loss"])) for h in result.history)
    assert {"vid", "mim", "jigsaw"} <= set(result.history[0])


def test_init_from_a_registry_name(official, video_dir, frame_cache, tmp_path, monkeypatch) -> None:
    path, checkpoint = official
    serve_from_hf_cache(monkeypatch, tmp_path / "hf", path)
    model = PLStitchModel(_config(video_dir, frame_cache, init="pl-stitch-lemon"))
    expected = expected_tensors(checkpoint)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in expected.items())


def test_disabled_branches_report_unused_parts(official, video_dir, frame_cache, log_messages) -> None:
    path, checkpoint = official
    model = PLStitchModel(_config(video_dir, frame_cache, init=str(path), lambda_jigsaw=0.0, lambda_mim=0.0))
    assert torch.equal(
        model.student["backbone"].vit.pos_embed, unwrap(checkpoint["student"])["backbone.pos_embed"]
    )
    text = "\n".join(log_messages)
    assert "puzzle_decoder (this run has no jigsaw_head)" in text and "iBOT heads (lambda_mim = 0)" in text


def test_other_specs_initialise_the_backbones_alone(
    video_dir: Path, frame_cache: Path, tmp_path: Path, log_messages
) -> None:
    from plstitch_eval.hub import DataConfig, save_timm_dir

    config = _config(video_dir, frame_cache)
    donor = PLStitchModel(config).student["backbone"].vit
    with torch.no_grad():
        for param in donor.parameters():
            param.add_(0.5)
    save_timm_dir(donor, tmp_path / "timm", DataConfig.for_size(TINY["img"]))
    torch.manual_seed(7)
    fresh = PLStitchModel(config)
    torch.manual_seed(7)
    model = PLStitchModel(config.replace(init=str(tmp_path / "timm")))
    for branch in (model.student, model.teacher):
        for key, value in donor.state_dict().items():
            assert torch.equal(branch["backbone"].vit.state_dict()[key], value), key
    # heads are as a run without --init builds them (same seed), not from the donor
    torch.testing.assert_close(
        model.student["jigsaw_head"].state_dict(), fresh.student["jigsaw_head"].state_dict()
    )
    text = "\n".join(log_messages)
    assert "loaded the student and teacher backbones" in text and "starting fresh" in text


def test_mismatches_are_errors_listing_keys(official, video_dir, frame_cache, tmp_path) -> None:
    path, checkpoint = official
    with pytest.raises(CheckpointError, match="ibot_head|iBOT head"):
        PLStitchModel(_config(video_dir, frame_cache, init=str(path), ibot_out_dim=128))
    with pytest.raises(CheckpointError, match="temporal_head"):
        PLStitchModel(_config(video_dir, frame_cache, init=str(path), temporal_layers=2))
    broken = official_checkpoint()
    teacher = dict(broken["teacher"])
    teacher["module.head.last_layer2.weight_v"] = teacher["module.head.last_layer2.weight_v"] + 1
    torch.save(dict(broken, teacher=teacher), tmp_path / "alias.pth")
    with pytest.raises(CheckpointError, match="last_layer2"):
        PLStitchModel(_config(video_dir, frame_cache, init=str(tmp_path / "alias.pth")))
    student = {k: v for k, v in broken["student"].items() if "masked_embed" not in k}
    torch.save(dict(broken, student=student), tmp_path / "no_mask.pth")
    with pytest.raises(CheckpointError, match="masked_embed"):
        PLStitchModel(_config(video_dir, frame_cache, init=str(tmp_path / "no_mask.pth")))


def test_init_from_a_full_ibot_checkpoint(
    video_dir: Path, frame_cache: Path, tmp_path: Path, log_messages
) -> None:
    """A full iBOT checkpoint (student, teacher, ibot_loss; no PL-Stitch heads), as the authors start from
    ImageNet iBOT: backbones, both iBOT heads and the centres come from the file, the PL heads start fresh."""
    checkpoint = official_checkpoint()
    ibot = {k: checkpoint[k] for k in ("student", "teacher", "ibot_loss")}
    torch.save(ibot, tmp_path / "ibot_full.pth")
    config = _config(video_dir, frame_cache)
    torch.manual_seed(3)
    fresh = PLStitchModel(config)
    torch.manual_seed(3)
    model = PLStitchModel(config.replace(init=str(tmp_path / "ibot_full.pth")))
    state = model.state_dict()
    pl_heads = ("student.temporal_head.", "student.jigsaw_head.")
    expected = {k: v for k, v in expected_tensors(checkpoint).items() if not k.startswith(pl_heads)}
    assert any(k.startswith("teacher.ibot_head.") for k in expected) and "ibot_loss.center" in expected
    for key, value in expected.items():
        assert torch.equal(state[key], value), key
    for name in ("temporal_head", "jigsaw_head"):  # as a run without --init builds them (same seed)
        torch.testing.assert_close(model.student[name].state_dict(), fresh.student[name].state_dict())
    text = "\n".join(log_messages)
    assert "teacher iBOT head (shared last layer); iBOT centres" in text
    assert "starting fresh: temporal_head; jigsaw_head" in text
