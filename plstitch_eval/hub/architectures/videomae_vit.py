"""VideoMAE V2's ViT clip encoder, with the upstream key names so its checkpoints load strictly.

Follows github.com/OpenGVLab/VideoMAEv2 `models/modeling_finetune.py` (`VisionTransformer`, `Block`,
`Attention`, `PatchEmbed`, `get_sinusoid_encoding_table`): a tubelet patch embedding (`patch_embed.proj`,
Conv3d over `tubelet_size` frames), a fixed sine-cosine position table (not a weight), pre-norm blocks whose
attention has a query and a value bias but no key bias (`attn.q_bias`, `attn.v_bias`), optional layer scale
(`gamma_1`, `gamma_2`), and the clip feature `fc_norm(mean over tokens)` (`use_mean_pooling=True`,
`forward_features`). A pretraining encoder (`modeling_pretrain.py`, keys under `encoder.`) has a token `norm`
instead of `fc_norm`; its feature is the mean of its normalised tokens. Attention, block and tubelet
embedding are the clip encoders' shared ones (`hub/architectures/video_blocks.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub.architectures.video_blocks import (
    FusedQKVAttention,
    PreNormBlock,
    TubeletEmbed,
    check_clip_shape,
    check_tubelet_sizes,
)
from plstitch_eval.hub.convert import (
    HEAD_DIM,
    check_expected,
    find_num_heads,
    load_strict,
    refuse_unmapped_tokens,
    split_backbone,
    unwrap_state_dict,
)

LAYER_NORM_EPS = 1e-6  # vit_*_patch16_224 in modeling_finetune.py: partial(nn.LayerNorm, eps=1e-6)
TOP_LEVEL = {"patch_embed", "pos_embed", "blocks", "fc_norm", "norm"}


def sinusoid_table(positions: int, dim: int) -> torch.Tensor:
    """[1, positions, dim] table: angle p / 10000^(2*(j//2)/dim), sine on even j, cosine on odd j."""
    position = torch.arange(positions, dtype=torch.float64)[:, None]
    exponent = 2 * torch.div(torch.arange(dim), 2, rounding_mode="floor").to(torch.float64) / dim
    angles = position / torch.pow(10000.0, exponent)
    table = torch.empty_like(angles)
    table[:, 0::2] = torch.sin(angles[:, 0::2])
    table[:, 1::2] = torch.cos(angles[:, 1::2])
    return table.to(torch.float32)[None]


class QVBiasAttention(FusedQKVAttention):
    """Multi-head self-attention whose qkv projection has query and value biases and no key bias (BEiT)."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True) -> None:
        super().__init__(dim, num_heads, "qv" if qkv_bias else "none")


class VideoMAEBlock(PreNormBlock):
    """Pre-norm block: x + g1 * attn(norm1(x)), then x + g2 * mlp(norm2(x)) (g = 1 without layer scale)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: bool, layer_scale: bool) -> None:
        super().__init__(
            dim, QVBiasAttention(dim, num_heads, qkv_bias), mlp_ratio, LAYER_NORM_EPS, layer_scale
        )


class VideoMAEv2ViT(nn.Module):
    """VideoMAE V2 ViT: clip [B, 3, T, H, W] -> one feature [B, D] (see the module docstring for pooling)."""

    def __init__(
        self,
        img_size: int = 224,
        patch_size: int = 16,
        tubelet_size: int = 2,
        num_frames: int = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
        depth: int = 12,
        num_heads: int = 12,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        layer_scale: bool = False,
        learnable_pos_embed: bool = False,
        pooling: str = "fc_norm",
    ) -> None:
        super().__init__()
        check_tubelet_sizes("VideoMAE V2", num_frames, tubelet_size, img_size, patch_size)
        if pooling not in ("fc_norm", "norm"):
            raise ConfigError(f"VideoMAE V2 pooling is 'fc_norm' or 'norm', got {pooling!r}.")
        self.num_features = self.embed_dim = embed_dim
        self.img_size, self.patch_size, self.tubelet_size = img_size, patch_size, tubelet_size
        self.num_frames = num_frames
        self.pooling = pooling
        self.patch_embed = TubeletEmbed(patch_size, tubelet_size, in_chans, embed_dim)
        positions = (img_size // patch_size) ** 2 * (num_frames // tubelet_size)
        if learnable_pos_embed:
            self.pos_embed = nn.Parameter(torch.zeros(1, positions, embed_dim))
        else:  # a fixed table: not in the checkpoint, so not in the state dict either
            self.register_buffer("pos_embed", sinusoid_table(positions, embed_dim), persistent=False)
        self.blocks = nn.ModuleList(
            VideoMAEBlock(embed_dim, num_heads, mlp_ratio, qkv_bias, layer_scale) for _ in range(depth)
        )
        norm = nn.LayerNorm(embed_dim, eps=LAYER_NORM_EPS)
        if pooling == "fc_norm":
            self.fc_norm = norm
        else:
            self.norm = norm

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        """[B, 3, T, H, W] normalised clips -> [B, D]."""
        check_clip_shape("VideoMAE V2", clips, self.num_frames, self.img_size)
        x = self.patch_embed(clips)
        x = x + self.pos_embed.to(x.dtype)
        for block in self.blocks:
            x = block(x)
        if self.pooling == "fc_norm":
            return self.fc_norm(x.mean(1))
        return self.norm(x).mean(1)


def videomae_args(
    state: Mapping[str, torch.Tensor], num_heads: int | None = None, source: str = "checkpoint"
) -> dict[str, Any]:
    """Constructor arguments read from the tensors (all but `img_size` and `num_frames`, which the fixed
    position table does not record)."""
    proj = state.get("patch_embed.proj.weight")
    if proj is None or proj.ndim != 5:
        raise CheckpointError(
            f"{source} is not a VideoMAE V2 encoder: it needs a Conv3d 'patch_embed.proj.weight' "
            f"[D, 3, t, p, p]; top-level keys: {sorted({k.split('.', 1)[0] for k in state})[:20]}."
        )
    embed_dim, in_chans, tubelet, patch_h, patch_w = proj.shape
    depth = 1 + max((int(m.group(1)) for k in state if (m := re.match(r"blocks\.(\d+)\.", k))), default=-1)
    if depth == 0 or patch_h != patch_w:
        raise CheckpointError(f"{source}: no 'blocks.N.*' keys or a non-square patch {patch_h}x{patch_w}.")
    pooling = [name for name in ("fc_norm", "norm") if f"{name}.weight" in state]
    if len(pooling) != 1:
        raise CheckpointError(
            f"{source} must hold exactly one final norm, 'fc_norm.*' (mean pooling, fine-tuned layout) or "
            f"'norm.*' (pretraining encoder); found {pooling or 'neither'}."
        )
    heads = num_heads or max(1, embed_dim // HEAD_DIM)
    if embed_dim % heads:
        raise CheckpointError(f"{source}: embed_dim {embed_dim} is not divisible by {heads} heads.")
    return {
        "patch_size": int(patch_h),
        "tubelet_size": int(tubelet),
        "in_chans": int(in_chans),
        "embed_dim": int(embed_dim),
        "depth": depth,
        "num_heads": heads,
        "mlp_ratio": state["blocks.0.mlp.fc1.weight"].shape[0] / embed_dim
        if "blocks.0.mlp.fc1.weight" in state
        else 4.0,
        "qkv_bias": "blocks.0.attn.q_bias" in state,
        "layer_scale": "blocks.0.gamma_1" in state,
        "learnable_pos_embed": "pos_embed" in state,
        "pooling": pooling[0],
    }


def videomae_from_state_dict(
    checkpoint: Any,
    *,
    num_frames: int = 16,
    img_size: int = 224,
    which: str = "teacher",
    source: str = "checkpoint",
    expected: Mapping[str, Any] | None = None,
) -> tuple[VideoMAEv2ViT, list[str]]:
    """A `VideoMAEv2ViT` loaded strictly from a checkpoint in an upstream layout (fine-tuned `model`/`module`
    dict, Hugging Face `model.`-prefixed safetensors, or pretraining `encoder.` keys).

    Classifier (`head.*`) and pretraining decoder keys are dropped (returned); a missing, unexpected or
    mis-shaped encoder tensor raises `CheckpointError` listing the keys.
    """
    state = unwrap_state_dict(checkpoint, which)
    backbone, dropped = split_backbone(state, TOP_LEVEL)
    refuse_unmapped_tokens(dropped, source)
    args = videomae_args(backbone, find_num_heads(checkpoint), source)
    if args["learnable_pos_embed"]:
        grid = (img_size // args["patch_size"]) ** 2
        positions = backbone["pos_embed"].shape[1]
        if positions % grid:
            raise CheckpointError(
                f"{source}: pos_embed has {positions} positions, not a multiple of the {grid} patches of a "
                f"{img_size}-px frame; set the model's input size to the checkpoint's."
            )
        num_frames = positions // grid * args["tubelet_size"]
    check_expected({**args, "num_frames": num_frames, "img_size": img_size}, expected, source)
    model = VideoMAEv2ViT(img_size=img_size, num_frames=num_frames, **args)
    load_strict(model, backbone, source)
    return model.eval(), dropped
