"""iBOT local crops (`local_crops` > 0): smaller views through the backbone, their items, their loss terms."""

from __future__ import annotations

from pathlib import Path

import pytest
import timm
import torch
import torch.nn.functional as F

from plstitch_eval.errors import ConfigError
from plstitch_train.config import TrainConfig
from plstitch_train.data import FrameStore, build_training_data, discover_videos, local_crop_size
from plstitch_train.model import PLStitchModel, ViTBackbone, build_vit
from plstitch_train.trainer import train
from tests.train.conftest import tiny_config


@pytest.fixture(scope="module")
def config(video_dir: Path, frame_cache: Path) -> TrainConfig:
    return tiny_config(video_dir, frame_cache, local_crops=3, local_crop_size=16)


def _manual_tokens(vit, images: torch.Tensor) -> torch.Tensor:
    """ViT tokens at another size, written out: bicubic (antialiased) resampling of the patch grid's position
    embedding, the CLS position kept, then the blocks and the final norm."""
    dim, patch = vit.embed_dim, vit.patch_embed.patch_size[0]
    h, w = images.shape[-2] // patch, images.shape[-1] // patch
    grid = vit.patch_embed.grid_size
    cls_pos, patch_pos = vit.pos_embed[:, :1], vit.pos_embed[:, 1:]
    patch_pos = patch_pos.reshape(1, grid[0], grid[1], dim).permute(0, 3, 1, 2)
    patch_pos = F.interpolate(patch_pos, size=(h, w), mode="bicubic", antialias=True, align_corners=False)
    pos = torch.cat([cls_pos, patch_pos.permute(0, 2, 3, 1).reshape(1, h * w, dim)], dim=1)
    x = F.conv2d(images, vit.patch_embed.proj.weight, vit.patch_embed.proj.bias, stride=patch)
    x = torch.cat([vit.cls_token.expand(len(images), -1, -1), x.flatten(2).transpose(1, 2)], dim=1) + pos
    return vit.norm(vit.blocks(x))


def test_backbone_takes_smaller_images_with_a_resampled_position_embedding(config) -> None:
    backbone = ViTBackbone(build_vit(config.model, 0.0)).eval()
    with torch.no_grad():
        backbone.vit.pos_embed.normal_()  # a non-constant embedding, so resampling shows
        images = torch.randn(2, 3, 16, 24)
        tokens = backbone(images)
        assert tokens.shape == (2, 1 + 2 * 3, config.model_args["embed_dim"])
        torch.testing.assert_close(tokens, _manual_tokens(backbone.vit, images), atol=1e-5, rtol=1e-5)
        # timm's own dynamic-size ViT with the same weights agrees
        dynamic = timm.create_model(
            config.arch, num_classes=0, img_size=config.img_size, dynamic_img_size=True, **config.model_args
        ).eval()
        dynamic.load_state_dict(backbone.vit.state_dict())
        torch.testing.assert_close(tokens, dynamic.forward_features(images), atol=1e-5, rtol=1e-5)
        with pytest.raises(ConfigError, match="whole number"):
            backbone(torch.randn(1, 3, 20, 20))


def test_local_crop_size_defaults_to_dino_ratio_in_whole_patches() -> None:
    assert local_crop_size(0, 224, 16) == 96  # DINO: 96 px local crops at 224
    assert local_crop_size(0, 64, 8) == 24  # 27.4 px -> 3 patches
    assert local_crop_size(0, 16, 8) == 8  # never below one patch
    assert local_crop_size(40, 64, 8) == 40


def test_items_carry_seeded_local_crops(config, video_dir: Path) -> None:
    store = FrameStore.build(
        discover_videos(config.data, config.fps),
        config.fps,
        config.frame_size,
        Path(config.cache_dir),
        config.clip_len,
    )
    data = build_training_data(config, store, (4, 4))
    spec = next(iter(data.sampler))[0]
    item = data.dataset[spec]
    assert item["local_crops"].shape == (3, 3, 16, 16) and item["crops"].shape == (2, 3, 32, 32)
    assert torch.equal(item["local_crops"], data.dataset[spec]["local_crops"])  # a function of the spec
    assert not torch.equal(item["local_crops"][0], item["local_crops"][1])  # each view its own draw
    none = build_training_data(config.replace(local_crops=0), store, (4, 4)).dataset[spec]
    assert "local_crops" not in none and torch.equal(none["crops"], item["crops"])  # globals unchanged


def test_local_crops_add_the_ibot_cls_terms(config) -> None:
    """mim_loss with local crops = the iBOT loss given the student's local CLS outputs (teacher: globals)."""
    torch.manual_seed(0)
    model = PLStitchModel(config).train()
    crops = torch.randn(2, 2, 3, 32, 32)
    local = torch.randn(2, 3, 3, 16, 16)
    masks = torch.rand(2, 2, 4, 4) < 0.3
    centre = model.ibot_loss.center.clone()
    with_local = model.mim_loss(crops, masks, 0, local)
    model.ibot_loss.center.copy_(centre)
    model.ibot_loss.center2.zero_()
    flat = crops.transpose(0, 1).flatten(0, 1)
    flat_masks = masks.transpose(0, 1).flatten(0, 1)
    with torch.no_grad():
        t_cls, t_patch = model.teacher["ibot_head"](model.teacher["backbone"](flat))
    s_cls, s_patch = model.student["ibot_head"](model.student["backbone"](flat, masks=flat_masks))
    local_cls = model.student["ibot_head"](model.student["backbone"](local.transpose(0, 1).flatten(0, 1)))[0]
    # the iBOT CLS terms written out: teacher global a vs every student view b != a (2 globals + 3 locals)
    temp = model.ibot_loss.temperatures(0)[0]
    targets = F.softmax((t_cls - centre) / temp, dim=-1).chunk(2)
    student_temp = model.ibot_loss.student_temp
    views = (s_cls / student_temp).chunk(2) + (local_cls / student_temp).chunk(3)
    terms = [
        (-targets[a] * F.log_softmax(views[b], dim=-1)).sum(-1).mean()
        for a in range(2)
        for b in range(5)
        if a != b
    ]
    cls_loss = torch.stack(terms).mean()
    patch_only = model.ibot_loss(s_cls, s_patch, t_cls, t_patch, flat_masks, 0, update_center=False)["patch"]
    torch.testing.assert_close(with_local, cls_loss + patch_only, atol=1e-5, rtol=1e-5)
    assert len(terms) == 8


def test_training_with_local_crops_runs_and_resumes_its_settings(config, tmp_path: Path) -> None:
    result = train(config.replace(max_steps=2, lambda_vid=0.0, lambda_jigsaw=0.0), tmp_path / "run")
    assert result.step == 2 and all(torch.isfinite(torch.tensor(h["mim"])) for h in result.history)
    with pytest.raises(ConfigError, match="local_crops"):
        config.replace(local_crops=-1)
    with pytest.raises(ConfigError, match="local_crops_scale"):
        config.replace(local_crops_scale=(0.5, 0.2))
