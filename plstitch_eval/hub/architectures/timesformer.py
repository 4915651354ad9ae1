"""TimeSformer with divided space-time attention (Endo-FM's backbone), with the upstream key names.

Follows github.com/med-air/Endo-FM `models/timesformer.py` (`VisionTransformer.forward_features`, `Block` with
`attention_type='divided_space_time'`), itself from facebookresearch/TimeSformer: per-frame patches
(`patch_embed.proj`, Conv2d) plus `pos_embed`, a learned `time_embed` over the frames, a CLS token; each block
adds temporal attention (`temporal_norm1`, `temporal_attn`, `temporal_fc`) over each patch's frames, then
spatial attention (`norm1`, `attn`) within each frame with a copy of the CLS token whose outputs are averaged
over the frames, then the MLP. The clip feature is the CLS token after the final `norm` (`x[:, 0]`).
Both attentions are the clip encoders' shared `FusedQKVAttention` (`architectures/video_blocks.py`, timm's key
names); the block is its own: its temporal half and CLS copies fit no plain pre-norm block.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import torch
from timm.layers import Mlp, PatchEmbed
from torch import nn
from torch.nn import functional as F

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub.architectures.video_blocks import FusedQKVAttention
from plstitch_eval.hub.convert import (
    HEAD_DIM,
    check_expected,
    find_num_heads,
    load_strict,
    refuse_unmapped_tokens,
    split_backbone,
    unwrap_state_dict,
)

LAYER_NORM_EPS = 1e-6  # get_vit_base_patch16_224: norm_layer=partial(nn.LayerNorm, eps=1e-6)
TOP_LEVEL = {"cls_token", "pos_embed", "time_embed", "patch_embed", "blocks", "norm"}


class DividedSpaceTimeBlock(nn.Module):
    """One TimeSformer block on [B, 1 + S*T, D] tokens ordered (space, time) after the CLS token."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        bias = "qkv" if qkv_bias else "none"
        self.attn = FusedQKVAttention(dim, num_heads, bias)
        self.temporal_norm1 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.temporal_attn = FusedQKVAttention(dim, num_heads, bias)
        self.temporal_fc = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor, frames: int) -> torch.Tensor:
        batch, _, dim = x.shape
        cls, tokens = x[:, :1], x[:, 1:]
        space = tokens.shape[1] // frames
        # temporal attention: each patch position attends over its own frames
        across_time = tokens.reshape(batch * space, frames, dim)
        residual = self.temporal_attn(self.temporal_norm1(across_time)).reshape(batch, space * frames, dim)
        tokens = tokens + self.temporal_fc(residual)
        # spatial attention: each frame with its own copy of the CLS token
        per_frame = (
            tokens.reshape(batch, space, frames, dim).transpose(1, 2).reshape(batch * frames, space, dim)
        )
        cls_copies = cls.expand(batch, frames, dim).reshape(batch * frames, 1, dim)
        spatial = self.attn(self.norm1(torch.cat((cls_copies, per_frame), dim=1)))
        cls_residual = spatial[:, 0].reshape(batch, frames, dim).mean(1, keepdim=True)
        spatial = spatial[:, 1:].reshape(batch, frames, space, dim).transpose(1, 2).reshape(batch, -1, dim)
        x = torch.cat((cls, tokens), dim=1) + torch.cat((cls_residual, spatial), dim=1)
        return x + self.mlp(self.norm2(x))


class TimeSformer(nn.Module):
    """Divided space-time TimeSformer: clip [B, 3, T, H, W] -> CLS feature [B, D] after the final norm."""

    def __init__(
        self,
        img_size: int = 224,
        patch_size: int = 16,
        num_frames: int = 8,
        in_chans: int = 3,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
    ) -> None:
        super().__init__()
        self.num_features = self.embed_dim = embed_dim
        self.img_size, self.patch_size = img_size, patch_size
        self.num_frames = num_frames
        self.patch_embed = PatchEmbed(img_size, patch_size, in_chans, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, (img_size // patch_size) ** 2 + 1, embed_dim))
        self.time_embed = nn.Parameter(torch.zeros(1, num_frames, embed_dim))
        self.blocks = nn.ModuleList(
            DividedSpaceTimeBlock(embed_dim, num_heads, mlp_ratio, qkv_bias) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(embed_dim, eps=LAYER_NORM_EPS)

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        """[B, 3, T, H, W] normalised clips -> [B, D]; T other than `num_frames` resamples `time_embed`
        (nearest, as upstream)."""
        if clips.ndim != 5 or tuple(clips.shape[3:]) != (self.img_size, self.img_size):
            raise ConfigError(
                f"TimeSformer takes clips [B, 3, T, {self.img_size}, {self.img_size}], "
                f"got {tuple(clips.shape)}."
            )
        batch, channels, frames, height, width = clips.shape
        x = self.patch_embed(clips.transpose(1, 2).reshape(batch * frames, channels, height, width))
        x = x + self.pos_embed[:, 1:]  # [B*T, S, D]
        space, dim = x.shape[1], x.shape[2]
        x = x.reshape(batch, frames, space, dim).transpose(1, 2) + self._time_embed(frames)[:, None]
        cls = (self.cls_token + self.pos_embed[:, :1]).expand(batch, 1, dim)
        x = torch.cat((cls, x.reshape(batch, space * frames, dim)), dim=1)
        for block in self.blocks:
            x = block(x, frames)
        return self.norm(x)[:, 0]

    def _time_embed(self, frames: int) -> torch.Tensor:
        if frames == self.time_embed.shape[1]:
            return self.time_embed
        return F.interpolate(self.time_embed.transpose(1, 2), size=frames, mode="nearest").transpose(1, 2)


def timesformer_args(
    state: Mapping[str, torch.Tensor], num_heads: int | None = None, source: str = "checkpoint"
) -> dict[str, Any]:
    """Constructor arguments from the tensors: width, depth, patch, grid (pos_embed), frames (time_embed)."""
    for needed in ("patch_embed.proj.weight", "pos_embed", "time_embed", "cls_token"):
        if needed not in state:
            raise CheckpointError(
                f"{source} is not a TimeSformer: {needed!r} is missing; top-level keys: "
                f"{sorted({k.split('.', 1)[0] for k in state})[:20]}."
            )
    if "blocks.0.temporal_attn.qkv.weight" not in state:
        raise CheckpointError(
            f"{source}: blocks.0 has no temporal attention; only divided space-time TimeSformers "
            "(Endo-FM, TimeSformer divST) are supported, not space-only or joint attention."
        )
    embed_dim, in_chans, patch_h, patch_w = state["patch_embed.proj.weight"].shape
    grid = math.isqrt(state["pos_embed"].shape[1] - 1)
    if patch_h != patch_w or grid * grid != state["pos_embed"].shape[1] - 1:
        raise CheckpointError(
            f"{source}: pos_embed {tuple(state['pos_embed'].shape)} is not CLS + a square grid, or the patch "
            f"{patch_h}x{patch_w} is not square."
        )
    depth = 1 + max(int(m.group(1)) for k in state if (m := re.match(r"blocks\.(\d+)\.", k)))
    heads = num_heads or max(1, embed_dim // HEAD_DIM)
    if embed_dim % heads:
        raise CheckpointError(f"{source}: embed_dim {embed_dim} is not divisible by {heads} heads.")
    fc1 = state.get("blocks.0.mlp.fc1.weight")
    return {
        "img_size": int(grid * patch_h),
        "patch_size": int(patch_h),
        "num_frames": int(state["time_embed"].shape[1]),
        "in_chans": int(in_chans),
        "embed_dim": int(embed_dim),
        "depth": depth,
        "num_heads": heads,
        "mlp_ratio": fc1.shape[0] / embed_dim if fc1 is not None else 4.0,
        "qkv_bias": "blocks.0.attn.qkv.bias" in state,
    }


def timesformer_from_state_dict(
    checkpoint: Any,
    *,
    which: str = "teacher",
    source: str = "checkpoint",
    expected: Mapping[str, Any] | None = None,
) -> tuple[TimeSformer, list[str]]:
    """A `TimeSformer` loaded strictly from a checkpoint in an upstream layout (Endo-FM / SVT / DINO training
    dict: `teacher` with `backbone.` keys, or the bare backbone).

    Heads (`head.*`: DINO projection or classifier) are dropped (returned); a missing, unexpected or
    mis-shaped backbone tensor raises `CheckpointError` listing the keys.
    """
    state = unwrap_state_dict(checkpoint, which)
    backbone, dropped = split_backbone(state, TOP_LEVEL)
    refuse_unmapped_tokens(dropped, source)
    args = timesformer_args(backbone, find_num_heads(checkpoint), source)
    check_expected(args, expected, source)
    model = TimeSformer(**args)
    load_strict(model, backbone, source)
    return model.eval(), dropped
