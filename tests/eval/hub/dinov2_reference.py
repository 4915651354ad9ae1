"""DINOv2's ViT written on raw checkpoint tensors: random weights in its layout and its CLS feature.

Shared by the DINOv2 and T-CoRe tests (T-CoRe's backbone is DINOv2's ViT). The forward follows DINOv2's
`DinoVisionTransformer.forward_features` (prepare_tokens_with_masks: CLS + patches + position embedding, then
the registers inserted after CLS without one; pre-norm blocks with layer scale; final LayerNorm;
`x_norm_clstoken`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F


@dataclass(frozen=True)
class ViTDims:
    """Sizes of a test ViT; `grid` patches per side at the checkpoint's own resolution."""

    dim: int
    heads: int
    depth: int
    patch: int
    grid: int


def dinov2_state(
    dims: ViTDims, registers: int = 4, swiglu: bool = False, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Random weights named and shaped as DINOv2's ViT (as in `dinov2_vit*14_reg4_pretrain.pth`)."""
    gen = torch.Generator().manual_seed(seed)
    dim, hidden = dims.dim, 4 * dims.dim

    def rand(*shape: int, scale: float = 0.2) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * scale

    state = {
        "cls_token": rand(1, 1, dim),
        "pos_embed": rand(1, 1 + dims.grid * dims.grid, dim),
        "mask_token": rand(1, dim),
        "patch_embed.proj.weight": rand(dim, 3, dims.patch, dims.patch, scale=0.05),
        "patch_embed.proj.bias": rand(dim),
        "norm.weight": 1 + rand(dim),
        "norm.bias": rand(dim),
    }
    if registers:
        state["register_tokens"] = rand(1, registers, dim)
    for i in range(dims.depth):
        b = f"blocks.{i}."
        state |= {
            b + "norm1.weight": 1 + rand(dim),
            b + "norm1.bias": rand(dim),
            b + "attn.qkv.weight": rand(3 * dim, dim),
            b + "attn.qkv.bias": rand(3 * dim),
            b + "attn.proj.weight": rand(dim, dim),
            b + "attn.proj.bias": rand(dim),
            b + "ls1.gamma": rand(dim) + 0.5,
            b + "norm2.weight": 1 + rand(dim),
            b + "norm2.bias": rand(dim),
            b + "ls2.gamma": rand(dim) + 0.5,
        }
        mlp = (("w12", 2 * hidden), ("w3", dim)) if swiglu else (("fc1", hidden), ("fc2", dim))
        (first, first_out), (second, second_out) = mlp
        state |= {
            b + f"mlp.{first}.weight": rand(first_out, dim),
            b + f"mlp.{first}.bias": rand(first_out),
            b + f"mlp.{second}.weight": rand(second_out, hidden),
            b + f"mlp.{second}.bias": rand(second_out),
        }
    return state


def upstream_cls(dims: ViTDims, state: dict[str, torch.Tensor], images: torch.Tensor) -> torch.Tensor:
    """DINOv2's `x_norm_clstoken` (no position-embedding interpolation: `state` fits the images' grid)."""

    def norm(x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (dims.dim,), state[name + ".weight"], state[name + ".bias"], eps=1e-6)

    def linear(x: torch.Tensor, name: str) -> torch.Tensor:
        return x @ state[name + ".weight"].T + state[name + ".bias"]

    x = F.conv2d(images, state["patch_embed.proj.weight"], state["patch_embed.proj.bias"], stride=dims.patch)
    x = x.flatten(2).transpose(1, 2)
    x = torch.cat([state["cls_token"].expand(len(x), -1, -1), x], dim=1) + state["pos_embed"]
    if "register_tokens" in state:
        x = torch.cat([x[:, :1], state["register_tokens"].expand(len(x), -1, -1), x[:, 1:]], dim=1)
    for i in range(dims.depth):
        b = f"blocks.{i}."
        q, k, v = linear(norm(x, b + "norm1"), b + "attn.qkv").unflatten(-1, (3, dims.heads, -1)).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        weights = (q @ k.transpose(-1, -2) / (dims.dim // dims.heads) ** 0.5).softmax(-1)
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
