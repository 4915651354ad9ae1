"""facebookresearch/dinov2 checkpoints (registers, block chunks, SwiGLU) give the upstream CLS feature.

The reference below follows DINOv2's `DinoVisionTransformer.forward_features` (prepare_tokens_with_masks:
CLS + patches + position embedding, then the registers inserted after CLS without one; pre-norm blocks with
layer scale; final LayerNorm; `x_norm_clstoken`), straight on the checkpoint's tensors.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub import DataConfig, load_encoder, save_timm_dir
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.timm_format import load_timm_dir

DIM, HEADS, DEPTH, PATCH, GRID = 128, 2, 4, 14, 4  # 64-d heads, as every DINOv2 ViT


def dinov2_state(registers: int = 4, swiglu: bool = False, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random weights named and shaped as DINOv2's ViT (as in `dinov2_vit*14_reg4_pretrain.pth`)."""
    gen = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float = 0.2) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * scale

    hidden = 4 * DIM
    state = {
        "cls_token": rand(1, 1, DIM),
        "pos_embed": rand(1, 1 + GRID * GRID, DIM),
        "mask_token": rand(1, DIM),
        "patch_embed.proj.weight": rand(DIM, 3, PATCH, PATCH, scale=0.05),
        "patch_embed.proj.bias": rand(DIM),
        "norm.weight": 1 + rand(DIM),
        "norm.bias": rand(DIM),
    }
    if registers:
        state["register_tokens"] = rand(1, registers, DIM)
    for i in range(DEPTH):
        b = f"blocks.{i}."
        state |= {
            b + "norm1.weight": 1 + rand(DIM),
            b + "norm1.bias": rand(DIM),
            b + "attn.qkv.weight": rand(3 * DIM, DIM),
            b + "attn.qkv.bias": rand(3 * DIM),
            b + "attn.proj.weight": rand(DIM, DIM),
            b + "attn.proj.bias": rand(DIM),
            b + "ls1.gamma": rand(DIM) + 0.5,
            b + "norm2.weight": 1 + rand(DIM),
            b + "norm2.bias": rand(DIM),
            b + "ls2.gamma": rand(DIM) + 0.5,
        }
        if swiglu:
            state |= {
                b + "mlp.w12.weight": rand(2 * hidden, DIM),
                b + "mlp.w12.bias": rand(2 * hidden),
                b + "mlp.w3.weight": rand(DIM, hidden),
                b + "mlp.w3.bias": rand(DIM),
            }
        else:
            state |= {
                b + "mlp.fc1.weight": rand(hidden, DIM),
                b + "mlp.fc1.bias": rand(hidden),
                b + "mlp.fc2.weight": rand(DIM, hidden),
                b + "mlp.fc2.bias": rand(DIM),
            }
    return state


def upstream_cls(state: dict[str, torch.Tensor], images: torch.Tensor) -> torch.Tensor:
    """DINOv2's `x_norm_clstoken` at the checkpoint's own resolution (no position-embedding interpolation)."""

    def norm(x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (DIM,), state[name + ".weight"], state[name + ".bias"], eps=1e-6)

    def linear(x: torch.Tensor, name: str) -> torch.Tensor:
        return x @ state[name + ".weight"].T + state[name + ".bias"]

    x = F.conv2d(images, state["patch_embed.proj.weight"], state["patch_embed.proj.bias"], stride=PATCH)
    x = x.flatten(2).transpose(1, 2)
    x = torch.cat([state["cls_token"].expand(len(x), -1, -1), x], dim=1) + state["pos_embed"]
    if "register_tokens" in state:
        x = torch.cat([x[:, :1], state["register_tokens"].expand(len(x), -1, -1), x[:, 1:]], dim=1)
    for i in range(DEPTH):
        b = f"blocks.{i}."
        q, k, v = linear(norm(x, b + "norm1"), b + "attn.qkv").unflatten(-1, (3, HEADS, -1)).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        weights = (q @ k.transpose(-1, -2) / (DIM // HEADS) ** 0.5).softmax(-1)
        attended = (weights @ v).transpose(1, 2).flatten(2)
        x = x + state[b + "ls1.gamma"] * linear(attended, b + "attn.proj")
        h = norm(x, b + "norm2")
        if b + "mlp.w12.weight" in state:
            gate, value = linear(h, b + "mlp.w12").chunk(2, dim=-1)
            h = linear(F.silu(gate) * value, b + "mlp.w3")
        else:
            h = linear(F.gelu(linear(h, b + "mlp.fc1")), b + "mlp.fc2")
        x = x + state[b + "ls2.gamma"] * h
    return norm(x, "norm")[:, 0]


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
