"""DINOv3's ViT written on raw checkpoint tensors (Meta's layout): random weights and its CLS feature.

The forward follows github.com/facebookresearch/dinov3 `DinoVisionTransformer.forward_features` with
`rope_embed` (`RopePositionEmbedding`, normalize_coords "separate": patch centres (i + 0.5) / n mapped to
[-1, 1], angles 2 pi coord / period for the row then the column, tiled twice; `rope_apply` with
`rope_rotate_half` on the patch tokens only), `SelfAttentionBlock` (pre-norm, `LayerScale`,
`LinearKMaskedBias` qkv) and the final norm over all tokens, `x_norm_clstoken`. No timm code is used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass(frozen=True)
class Dims:
    """A test ViT: 64-d heads as every DINOv3 ViT (so RoPE has head_dim / 4 = 16 periods)."""

    dim: int = 128
    heads: int = 2
    depth: int = 2
    patch: int = 8
    storage: int = 4


def meta_state(
    dims: Dims = Dims(), seed: int = 0, mask_k_bias: bool = True, bf16_periods: bool = True
) -> dict[str, torch.Tensor]:
    """Random weights named and shaped as Meta's `DinoVisionTransformer` (pos_embed_rope_base 100)."""
    gen = torch.Generator().manual_seed(seed)
    dim, hidden = dims.dim, 4 * dims.dim

    def rand(*shape: int, scale: float = 0.2) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * scale

    head_dim = dim // dims.heads
    periods = 100.0 ** (2 * torch.arange(head_dim // 4, dtype=torch.float32) / (head_dim // 2))
    if bf16_periods:  # Meta's released files hold the periods rounded to bfloat16
        periods = periods.to(torch.bfloat16).to(torch.float32)
    state = {
        "cls_token": rand(1, 1, dim),
        "mask_token": rand(1, dim),
        "patch_embed.proj.weight": rand(dim, 3, dims.patch, dims.patch, scale=0.05),
        "patch_embed.proj.bias": rand(dim),
        "rope_embed.periods": periods,
        "norm.weight": 1 + rand(dim),
        "norm.bias": rand(dim),
    }
    if dims.storage:
        state["storage_tokens"] = rand(1, dims.storage, dim)
    for i in range(dims.depth):
        b = f"blocks.{i}."
        state |= {
            b + "norm1.weight": 1 + rand(dim),
            b + "norm1.bias": rand(dim),
            b + "attn.qkv.weight": rand(3 * dim, dim, scale=dim**-0.5),
            b + "attn.qkv.bias": rand(3 * dim),
            b + "attn.proj.weight": rand(dim, dim, scale=dim**-0.5),
            b + "attn.proj.bias": rand(dim),
            b + "ls1.gamma": 0.5 + rand(dim),
            b + "norm2.weight": 1 + rand(dim),
            b + "norm2.bias": rand(dim),
            b + "mlp.fc1.weight": rand(hidden, dim, scale=dim**-0.5),
            b + "mlp.fc1.bias": rand(hidden),
            b + "mlp.fc2.weight": rand(dim, hidden, scale=hidden**-0.5),
            b + "mlp.fc2.bias": rand(dim),
            b + "ls2.gamma": 0.5 + rand(dim),
        }
        if mask_k_bias:  # LinearKMaskedBias after init_weights: 1 for q and v, 0 for k
            state[b + "attn.qkv.bias_mask"] = torch.cat([torch.ones(dim), torch.zeros(dim), torch.ones(dim)])
    return state


def transformers_state(state: dict[str, torch.Tensor], dims: Dims = Dims()) -> dict[str, torch.Tensor]:
    """The same weights in Hugging Face's `DINOv3ViTModel` names (k bias as stored, periods not stored)."""
    dim = dims.dim
    out = {
        "embeddings.cls_token": state["cls_token"],
        "embeddings.mask_token": state["mask_token"][None],
        "embeddings.register_tokens": state.get("storage_tokens", torch.zeros(1, 0, dim)),
        "embeddings.patch_embeddings.weight": state["patch_embed.proj.weight"],
        "embeddings.patch_embeddings.bias": state["patch_embed.proj.bias"],
        "norm.weight": state["norm.weight"],
        "norm.bias": state["norm.bias"],
    }
    for i in range(dims.depth):
        b, layer = f"blocks.{i}.", f"layer.{i}."
        bias = state[b + "attn.qkv.bias"] * state.get(b + "attn.qkv.bias_mask", torch.ones(3 * dim))
        for j, name in enumerate(("q_proj", "k_proj", "v_proj")):
            out[f"{layer}attention.{name}.weight"] = state[b + "attn.qkv.weight"][j * dim : (j + 1) * dim]
            out[f"{layer}attention.{name}.bias"] = bias[j * dim : (j + 1) * dim]
        out |= {
            layer + "attention.o_proj.weight": state[b + "attn.proj.weight"],
            layer + "attention.o_proj.bias": state[b + "attn.proj.bias"],
            layer + "layer_scale1.lambda1": state[b + "ls1.gamma"],
            layer + "layer_scale2.lambda1": state[b + "ls2.gamma"],
            layer + "mlp.up_proj.weight": state[b + "mlp.fc1.weight"],
            layer + "mlp.up_proj.bias": state[b + "mlp.fc1.bias"],
            layer + "mlp.down_proj.weight": state[b + "mlp.fc2.weight"],
            layer + "mlp.down_proj.bias": state[b + "mlp.fc2.bias"],
        }
        for norm in ("norm1", "norm2"):
            out[f"{layer}{norm}.weight"] = state[f"{b}{norm}.weight"]
            out[f"{layer}{norm}.bias"] = state[f"{b}{norm}.bias"]
    return out


def upstream_cls(
    state: dict[str, torch.Tensor],
    images: torch.Tensor,
    dims: Dims = Dims(),
    eps: float = 1e-5,
    periods: torch.Tensor | None = None,
) -> torch.Tensor:
    """DINOv3's `x_norm_clstoken` for images [B, 3, H, W] (periods: the stored ones unless given)."""
    dim, heads = dims.dim, dims.heads
    head_dim = dim // heads
    periods = state["rope_embed.periods"] if periods is None else periods

    def norm(x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (dim,), state[name + ".weight"], state[name + ".bias"], eps=eps)

    x = F.conv2d(images, state["patch_embed.proj.weight"], state["patch_embed.proj.bias"], stride=dims.patch)
    rows, cols = x.shape[-2:]
    x = x.flatten(2).transpose(1, 2)
    prefix = [state["cls_token"]] + ([state["storage_tokens"]] if "storage_tokens" in state else [])
    x = torch.cat([p.expand(len(x), -1, -1) for p in prefix] + [x], dim=1)
    n_prefix = x.shape[1] - rows * cols

    # RoPE angles, patch by patch in raster order: [row coord / periods, col coord / periods], tiled twice
    angles = torch.empty(rows * cols, head_dim)
    for r in range(rows):
        for c in range(cols):
            coord_r, coord_c = 2 * (r + 0.5) / rows - 1, 2 * (c + 0.5) / cols - 1
            half = torch.cat([2 * math.pi * coord_r / periods, 2 * math.pi * coord_c / periods])
            angles[r * cols + c] = torch.cat([half, half])

    def rope(t: torch.Tensor) -> torch.Tensor:  # t [B, heads, N, head_dim]; prefix tokens unrotated
        patches = t[:, :, n_prefix:]
        first, second = patches.chunk(2, dim=-1)
        rotated = torch.cat([-second, first], dim=-1)
        return torch.cat([t[:, :, :n_prefix], patches * angles.cos() + rotated * angles.sin()], dim=2)

    for i in range(dims.depth):
        b = f"blocks.{i}."
        bias = state[b + "attn.qkv.bias"] * state.get(b + "attn.qkv.bias_mask", torch.ones(3 * dim))
        qkv = norm(x, b + "norm1") @ state[b + "attn.qkv.weight"].T + bias
        q, k, v = (t.unflatten(-1, (heads, head_dim)).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
        q, k = rope(q), rope(k)
        weights = (q @ k.transpose(-1, -2) / head_dim**0.5).softmax(-1)
        attended = (weights @ v).transpose(1, 2).flatten(2)
        x = x + state[b + "ls1.gamma"] * (
            attended @ state[b + "attn.proj.weight"].T + state[b + "attn.proj.bias"]
        )
        h = norm(x, b + "norm2") @ state[b + "mlp.fc1.weight"].T + state[b + "mlp.fc1.bias"]
        h = F.gelu(h) @ state[b + "mlp.fc2.weight"].T + state[b + "mlp.fc2.bias"]
        x = x + state[b + "ls2.gamma"] * h
    return norm(x, "norm")[:, 0]
