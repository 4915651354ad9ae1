"""facebookresearch/dinov2 checkpoints (registers, block chunks, SwiGLU) give the upstream CLS feature.

The reference forward (`dinov2_reference.py`) is written from DINOv2's code on the checkpoint tensors.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch.nn import functional as F

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub import DataConfig, load_encoder, save_timm_dir
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.timm_format import load_timm_dir
from tests.eval.hub import dinov2_reference as reference
from tests.eval.hub.dinov2_reference import ViTDims

DIMS = ViTDims(dim=128, heads=2, depth=4, patch=14, grid=4)  # 64-d heads, as every DINOv2 ViT
DIM, DEPTH, PATCH, GRID = DIMS.dim, DIMS.depth, DIMS.patch, DIMS.grid
dinov2_state = partial(reference.dinov2_state, DIMS)
upstream_cls = partial(reference.upstream_cls, DIMS)


def _images() -> torch.Tensor:
    return torch.randn(2, 3, GRID * PATCH, GRID * PATCH, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("registers", [4, 0])
def test_hub_layout_gives_the_upstream_cls_feature(tmp_path, registers):
    state = dinov2_state(registers=registers)
    path = tmp_path / "dinov2_reg4_pretrain.pth"
    torch.save(state, path)
    encoder = load_encoder(path)
    assert encoder.model.num_reg_tokens == registers
    assert encoder.data_config.input_size == (3, GRID * PATCH, GRID * PATCH)
    with torch.no_grad():
        torch.testing.assert_close(encoder(_images()), upstream_cls(state, _images()), rtol=1e-4, atol=1e-4)
    assert encoder.provenance["dropped_keys"] == 1  # the mask token, used only for masked training


def test_registers_change_the_feature(tmp_path):
    """Guard that the comparison above can fail: the same weights without their registers differ."""
    state = dinov2_state(registers=4)
    without = {k: v for k, v in state.items() if k != "register_tokens"}
    with torch.no_grad():
        assert not torch.allclose(upstream_cls(state, _images()), upstream_cls(without, _images()), atol=1e-3)


def test_training_checkpoint_with_block_chunks_and_swiglu(tmp_path):
    """A DINOv2 training checkpoint: teacher/backbone prefixes, FSDP block chunks, ViT-g's fused SwiGLU."""
    state = dinov2_state(registers=4, swiglu=True, seed=3)
    chunk = DEPTH // 2

    def chunked(key: str) -> str:
        if key.startswith("blocks."):
            index = int(key.split(".")[1])
            return f"blocks.{index // chunk}.{key.split('.', 1)[1]}"
        return key

    checkpoint = {
        "teacher": {f"backbone.{chunked(k)}": v for k, v in state.items()}
        | {"dino_head.last_layer.weight": torch.zeros(8, DIM)},
        "iteration": 10,
    }
    path = tmp_path / "teacher_checkpoint.pth"
    torch.save(checkpoint, path)
    encoder = load_encoder(path)
    with torch.no_grad():
        torch.testing.assert_close(encoder(_images()), upstream_cls(state, _images()), rtol=1e-4, atol=1e-4)


def test_unknown_token_tensors_are_refused_with_their_keys(tmp_path):
    state = dinov2_state(registers=0)
    state["memory_tokens"] = torch.zeros(1, 2, DIM)
    path = tmp_path / "odd.pth"
    torch.save(state, path)
    with pytest.raises(CheckpointError, match=r"cannot map: \['memory_tokens'\]"):
        load_encoder(path)


def test_registers_in_timm_names_load_too(tmp_path):
    """The same model in timm's layout (reg_token, CLS position folded in, pos_embed over patches only)."""
    state = dinov2_state(registers=4)
    timm_state = {k: v for k, v in state.items() if k not in ("register_tokens", "mask_token")}
    timm_state["reg_token"] = state["register_tokens"]
    timm_state["cls_token"] = state["cls_token"] + state["pos_embed"][:, :1]
    timm_state["pos_embed"] = state["pos_embed"][:, 1:]
    path = tmp_path / "timm_names.pth"
    torch.save(timm_state, path)
    with torch.no_grad():
        torch.testing.assert_close(
            load_encoder(path)(_images()), upstream_cls(state, _images()), rtol=1e-4, atol=1e-4
        )
    timm_state["pos_embed"] = state["pos_embed"][:, :7]  # neither layout: refused, not guessed
    torch.save(timm_state, path)
    with pytest.raises(CheckpointError, match="not a square grid"):
        load_encoder(path)


def test_timm_folder_at_224_interpolates_as_dinov2_with_registers(tmp_path):
    """Run at another size (as the `dinov2-vitb14-reg` entry runs 518-px weights at 224): timm's resampling
    (bicubic, antialias, patch grid only) is what DINOv2's registers models do (antialias=True, offset 0)."""
    state = dinov2_state(registers=4)
    raw = tmp_path / "raw.pth"
    torch.save(state, raw)
    folder = save_timm_dir(load_encoder(raw).model, tmp_path / "timm", DataConfig.for_size(GRID * PATCH))
    small = 3
    model, config = load_timm_dir(folder, img_size=small * PATCH)
    assert config.input_size == (3, small * PATCH, small * PATCH)
    patch_pos = state["pos_embed"][:, 1:].reshape(1, GRID, GRID, DIM).permute(0, 3, 1, 2)
    patch_pos = F.interpolate(patch_pos, size=(small, small), mode="bicubic", antialias=True)
    resized = dict(
        state, pos_embed=torch.cat([state["pos_embed"][:, :1], patch_pos.flatten(2).transpose(1, 2)], 1)
    )
    images = _images()[..., : small * PATCH, : small * PATCH]
    with torch.no_grad():
        torch.testing.assert_close(model(images), upstream_cls(resized, images), rtol=1e-4, atol=1e-4)


def test_swiglu_vit_is_not_written_as_a_plain_timm_folder(tmp_path):
    path = tmp_path / "vitg_like.pth"
    torch.save(dinov2_state(swiglu=True), path)
    with pytest.raises(ConfigError, match="SwiGLU|GluMlp"):
        save_timm_dir(load_encoder(path).model, tmp_path / "timm", DataConfig.for_size(GRID * PATCH))


def test_registry_has_dinov2_with_registers_at_224():
    entry = MODELS["dinov2-vitb14-reg"]
    assert entry.repo_id == "timm/vit_base_patch14_reg4_dinov2.lvd142m"
    assert entry.model_args == {"img_size": 224} and entry.data_config.input_size == (3, 224, 224)
