"""The transformer pieces the clip encoders share: fused-qkv attention, the pre-norm block, tubelet patches.

VideoMAE V2 (`architectures/videomae_vit.py`), V-JEPA 2 (`architectures/vjepa2.py`) and Endo-FM's TimeSformer
(`architectures/timesformer.py`) all attend with one fused `qkv` projection and an output `proj`, and
(TimeSformer's spatial half included) run pre-norm blocks `norm1`, `attn`, `norm2`, `mlp` (timm's GELU `Mlp`).
Their checkpoints differ only in where the attention bias sits - one `qkv.bias` (V-JEPA 2, TimeSformer, as
timm's `Attention`), or `q_bias` + `v_bias` and no key bias (VideoMAE V2, BEiT) - in V-JEPA 2's rotation of
queries and keys, and in VideoMAE V2's optional layer scale (`gamma_1`, `gamma_2`): the parameters below keep
every key name, so the checkpoints load strictly.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from timm.layers import Mlp
from torch import nn
from torch.nn import functional as F

from plstitch_eval.errors import ConfigError

ATTENTION_BIASES = ("qkv", "qv", "none")


class FusedQKVAttention(nn.Module):
    """Multi-head self-attention over [B, N, D]: one `qkv` projection, softmax(q k^T / sqrt(d)) v, `proj`.

    `bias`: "qkv" - one bias on the fused projection (`qkv.bias`); "qv" - query and value biases and none on
    the keys (`q_bias`, `v_bias`); "none". `rotate`, when given, is applied to queries and keys
    [B, heads, N, head_dim] before the product (V-JEPA 2's RoPE).
    """

    def __init__(self, dim: int, num_heads: int, bias: str = "qkv") -> None:
        super().__init__()
        if bias not in ATTENTION_BIASES:
            raise ConfigError(f"Attention bias is one of {', '.join(ATTENTION_BIASES)}, got {bias!r}.")
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias == "qkv")
        self.q_bias = nn.Parameter(torch.zeros(dim)) if bias == "qv" else None
        self.v_bias = nn.Parameter(torch.zeros(dim)) if bias == "qv" else None
        self.proj = nn.Linear(dim, dim)

    def qkv_bias(self) -> torch.Tensor | None:
        """The bias of the fused projection: `qkv.bias`, or [q_bias, 0, v_bias], or None."""
        if self.q_bias is not None and self.v_bias is not None:
            return torch.cat((self.q_bias, torch.zeros_like(self.v_bias), self.v_bias))
        return self.qkv.bias

    def forward(
        self, x: torch.Tensor, rotate: Callable[[torch.Tensor], torch.Tensor] | None = None
    ) -> torch.Tensor:
        batch, tokens, dim = x.shape
        qkv = F.linear(x, self.qkv.weight, self.qkv_bias()).reshape(batch, tokens, 3, self.num_heads, -1)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # [B, heads, N, head_dim] each
        if rotate is not None:
            q, k = rotate(q), rotate(k)
        out = F.scaled_dot_product_attention(q, k, v)  # softmax(q k^T / sqrt(head_dim)) v
        return self.proj(out.transpose(1, 2).reshape(batch, tokens, dim))


class PreNormBlock(nn.Module):
    """x + g1 * attn(norm1(x)), then x + g2 * mlp(norm2(x)); g = 1 without layer scale (`gamma_1`, `gamma_2`).

    Extra arguments of `forward` go to the attention (V-JEPA 2's token positions).
    """

    def __init__(
        self, dim: int, attn: nn.Module, mlp_ratio: float, norm_eps: float, layer_scale: bool = False
    ) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=norm_eps)
        self.attn = attn
        self.norm2 = nn.LayerNorm(dim, eps=norm_eps)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.gamma_1 = nn.Parameter(torch.ones(dim)) if layer_scale else None
        self.gamma_2 = nn.Parameter(torch.ones(dim)) if layer_scale else None

    def forward(self, x: torch.Tensor, *attn_args: torch.Tensor) -> torch.Tensor:
        if self.gamma_1 is None or self.gamma_2 is None:
            x = x + self.attn(self.norm1(x), *attn_args)
            return x + self.mlp(self.norm2(x))
        x = x + self.gamma_1 * self.attn(self.norm1(x), *attn_args)
        return x + self.gamma_2 * self.mlp(self.norm2(x))


class TubeletEmbed(nn.Module):
    """[B, 3, T, H, W] -> [B, (T/t)*(H/p)*(W/p), D] tokens, time-major, then raster (Conv3d t x p x p)."""

    def __init__(self, patch_size: int, tubelet_size: int, in_chans: int, embed_dim: int) -> None:
        super().__init__()
        kernel = (tubelet_size, patch_size, patch_size)
        self.proj = nn.Conv3d(in_chans, embed_dim, kernel_size=kernel, stride=kernel)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


def check_tubelet_sizes(
    model: str, num_frames: int, tubelet_size: int, img_size: int, patch_size: int
) -> None:
    """A `ConfigError` unless the window fills whole tubelets and the frame whole patches."""
    if num_frames % tubelet_size or img_size % patch_size:
        raise ConfigError(
            f"{model} needs frames divisible by the tubelet ({num_frames} % {tubelet_size}) and a size "
            f"divisible by the patch ({img_size} % {patch_size})."
        )


def check_clip_shape(model: str, clips: torch.Tensor, num_frames: int, img_size: int) -> None:
    """A `ConfigError` unless `clips` is [B, 3, num_frames, img_size, img_size]."""
    expected = (num_frames, img_size, img_size)
    if clips.ndim != 5 or tuple(clips.shape[2:]) != expected:
        raise ConfigError(
            f"{model} takes clips [B, 3, {expected[0]}, {expected[1]}, {expected[2]}], "
            f"got {tuple(clips.shape)}."
        )


__all__ = [
    "ATTENTION_BIASES",
    "FusedQKVAttention",
    "PreNormBlock",
    "TubeletEmbed",
    "check_clip_shape",
    "check_tubelet_sizes",
]
