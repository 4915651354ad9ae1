"""V-JEPA 2's video ViT (3-D RoPE, no CLS token), loaded strictly from the Hugging Face `VJEPA2Model` layout.

Follows github.com/facebookresearch/vjepa2 `src/models/vision_transformer.py` (`VisionTransformer` with
`use_rope=True`, as `src/hub/backbones.py` builds the released encoders), `src/models/utils/modules.py`
(`Block`, `RoPEAttention`, `rotate_queries_or_keys`) and `src/models/utils/patch_embed.py` (`PatchEmbed3D`):
a tubelet patch embedding (Conv3d over 2 frames x 16 x 16 px), no position table, pre-norm blocks (LayerNorm
eps 1e-6, GELU MLP) whose attention rotates the first three equal slices of every head's queries and keys by
the token's tubelet, row and column index, and a final LayerNorm over all tokens. The rotation keeps
upstream's published quirk (each slice's frequencies are tiled twice while adjacent pairs are rotated; the
weights were trained with it, and transformers' port keeps it too).

The frame feature is the mean of all output tokens of the window (see docs/baselines.md: the frozen
counterpart of the attentive probe V-JEPA 2 trains over all tokens). The Hub checkpoint
(`facebook/vjepa2-vitl-fpc64-256`, transformers `VJEPA2Model`) holds the encoder under `encoder.` and the
pretraining predictor under `predictor.`; the predictor is dropped (returned), every encoder tensor loads.
Attention, block and tubelet embedding are the clip encoders' shared ones (`architectures/video_blocks.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
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
from plstitch_eval.hub.convert import HEAD_DIM, check_expected, find_num_heads, load_strict, unwrap_state_dict

LAYER_NORM_EPS = 1e-6  # vit_large in src/models/vision_transformer.py: partial(nn.LayerNorm, eps=1e-6)
ROPE_BASE = 10000.0  # rotate_queries_or_keys: omega = 1 / 10000 ** (arange(D/2) / (D/2))
TRAINING_ONLY = ("predictor.",)  # the JEPA predictor: pretraining only
# transformers' VJEPA2Layer names -> upstream Block names (ours)
_BLOCK_PARTS = {
    "norm1": "norm1",
    "norm2": "norm2",
    "attention.proj": "attn.proj",
    "mlp.fc1": "mlp.fc1",
    "mlp.fc2": "mlp.fc2",
}


def rope_slice_dim(head_dim: int) -> int:
    """Channels per rotated axis (upstream `d_dim = h_dim = w_dim = 2 * ((head_dim // 3) // 2)`)."""
    return 2 * ((head_dim // 3) // 2)


def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Upstream's `rotate_queries_or_keys` on x [..., N, d] for positions [N] (computed in float32).

    Angles a_j = pos * 10000^(-j / (d/2)), j < d/2, laid out as [a_0..a_{d/2-1}, a_0..a_{d/2-1}]; the pairs
    (x_0, x_1), (x_2, x_3)... are rotated: out = x * cos(a) + [-x_1, x_0, -x_3, x_2, ...] * sin(a).
    """
    half = x.shape[-1] // 2
    omega = 1.0 / ROPE_BASE ** (torch.arange(half, dtype=torch.float32, device=x.device) / half)
    angles = (positions.to(torch.float32)[:, None] * omega).repeat(1, 2)  # [N, d]
    pairs = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
    return (x * angles.cos() + pairs * angles.sin()).to(x.dtype)


def token_positions(frames: int, rows: int, cols: int, device: torch.device | None = None) -> torch.Tensor:
    """[3, frames*rows*cols] tubelet, row and column index of each token (time-major, then raster order)."""
    ids = torch.arange(frames * rows * cols, device=device)
    per_frame = rows * cols
    return torch.stack((ids // per_frame, (ids % per_frame) // cols, ids % cols))


class RoPEAttention(FusedQKVAttention):
    """Multi-head self-attention with a fused qkv projection and V-JEPA 2's 3-D rotary embedding."""

    def __init__(self, dim: int, num_heads: int, qkv_bias: bool = True) -> None:
        super().__init__(dim, num_heads, "qkv" if qkv_bias else "none")
        self.axis_dim = rope_slice_dim(self.head_dim)

    def _rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        d = self.axis_dim
        parts = [rotate(x[..., i * d : (i + 1) * d], positions[i]) for i in range(3)]
        return torch.cat([*parts, x[..., 3 * d :]], dim=-1)  # channels past 3d stay as they are

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return super().forward(x, rotate=partial(self._rotate, positions=positions))


class VJEPA2Block(PreNormBlock):
    """Pre-norm block: x + attn(norm1(x)), then x + mlp(norm2(x)) (no layer scale)."""

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float, qkv_bias: bool, norm_eps: float) -> None:
        super().__init__(dim, RoPEAttention(dim, num_heads, qkv_bias), mlp_ratio, norm_eps)


class VJEPA2ViT(nn.Module):
    """V-JEPA 2 encoder: clip [B, 3, T, H, W] -> [B, D], the mean of its normalised tokens."""

    def __init__(
        self,
        img_size: int = 256,
        patch_size: int = 16,
        tubelet_size: int = 2,
        num_frames: int = 16,
        in_chans: int = 3,
        embed_dim: int = 1024,
        depth: int = 24,
        num_heads: int = 16,
        mlp_ratio: float = 4.0,
        qkv_bias: bool = True,
        norm_eps: float = LAYER_NORM_EPS,
    ) -> None:
        super().__init__()
        check_tubelet_sizes("V-JEPA 2", num_frames, tubelet_size, img_size, patch_size)
        if embed_dim % num_heads or rope_slice_dim(embed_dim // num_heads) == 0:
            raise ConfigError(
                f"V-JEPA 2: embed_dim {embed_dim} and {num_heads} heads leave no RoPE channels."
            )
        self.num_features = self.embed_dim = embed_dim
        self.img_size, self.patch_size, self.tubelet_size = img_size, patch_size, tubelet_size
        self.num_frames = num_frames
        self.patch_embed = TubeletEmbed(patch_size, tubelet_size, in_chans, embed_dim)
        self.blocks = nn.ModuleList(
            VJEPA2Block(embed_dim, num_heads, mlp_ratio, qkv_bias, norm_eps) for _ in range(depth)
        )
        self.norm = nn.LayerNorm(embed_dim, eps=norm_eps)

    def forward_tokens(self, clips: torch.Tensor) -> torch.Tensor:
        """[B, 3, T, H, W] normalised clips -> all tokens after the final norm [B, T/t * H/p * W/p, D]."""
        check_clip_shape("V-JEPA 2", clips, self.num_frames, self.img_size)
        x = self.patch_embed(clips)
        grid = self.img_size // self.patch_size
        positions = token_positions(self.num_frames // self.tubelet_size, grid, grid, device=x.device)
        for block in self.blocks:
            x = block(x, positions)
        return self.norm(x)

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        """[B, 3, T, H, W] normalised clips -> [B, D]: the mean of all normalised tokens."""
        return self.forward_tokens(clips).mean(1)


def from_transformers(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' `VJEPA2Model` encoder names (after `encoder.` is removed) -> ours; q/k/v fused.

    Unknown keys keep their names (and fail the strict load); keys already in upstream's names pass as is.
    """
    out: dict[str, torch.Tensor] = {}
    used: set[str] = set()
    blocks = sorted({int(m.group(1)) for k in state if (m := re.match(r"layer\.(\d+)\.", k))})
    for i in blocks:
        for kind in ("weight", "bias"):
            names = [f"layer.{i}.attention.{p}.{kind}" for p in ("query", "key", "value")]
            if all(n in state for n in names):
                out[f"blocks.{i}.attn.qkv.{kind}"] = torch.cat([state[n] for n in names])
                used.update(names)
    for key, tensor in state.items():
        if key in used:
            continue
        new = key
        if m := re.fullmatch(r"layer\.(\d+)\.(.+)\.(weight|bias)", key):
            part = _BLOCK_PARTS.get(m.group(2))
            new = f"blocks.{m.group(1)}.{part}.{m.group(3)}" if part else key
        elif key.startswith("embeddings.patch_embeddings.proj."):
            new = "patch_embed.proj." + key.rsplit(".", 1)[1]
        elif key.startswith("layernorm."):
            new = "norm." + key.rsplit(".", 1)[1]
        out[new] = tensor
    return out


def vjepa2_args(
    state: Mapping[str, torch.Tensor], num_heads: int | None = None, source: str = "checkpoint"
) -> dict[str, Any]:
    """Constructor arguments read from the (renamed) tensors: all but `img_size` and `num_frames`, which RoPE
    leaves free (the window and frame size come from the registry entry)."""
    proj = state.get("patch_embed.proj.weight")
    if proj is None or proj.ndim != 5:
        raise CheckpointError(
            f"{source} is not a V-JEPA 2 encoder: it needs a Conv3d patch embedding "
            f"('encoder.embeddings.patch_embeddings.proj.weight' [D, 3, t, p, p]); top-level keys: "
            f"{sorted({k.split('.', 1)[0] for k in state})[:20]}."
        )
    embed_dim, in_chans, tubelet, patch_h, patch_w = proj.shape
    depth = 1 + max((int(m.group(1)) for k in state if (m := re.match(r"blocks\.(\d+)\.", k))), default=-1)
    if depth == 0 or patch_h != patch_w:
        raise CheckpointError(f"{source}: no encoder layers or a non-square patch {patch_h}x{patch_w}.")
    heads = num_heads or max(1, embed_dim // HEAD_DIM)
    if embed_dim % heads:
        raise CheckpointError(f"{source}: embed_dim {embed_dim} is not divisible by {heads} heads.")
    fc1 = state.get("blocks.0.mlp.fc1.weight")
    return {
        "patch_size": int(patch_h),
        "tubelet_size": int(tubelet),
        "in_chans": int(in_chans),
        "embed_dim": int(embed_dim),
        "depth": depth,
        "num_heads": heads,
        "mlp_ratio": fc1.shape[0] / embed_dim if fc1 is not None else 4.0,
        "qkv_bias": "blocks.0.attn.qkv.bias" in state,
    }


def vjepa2_from_state_dict(
    checkpoint: Any,
    *,
    num_frames: int = 16,
    img_size: int = 256,
    which: str = "teacher",
    source: str = "checkpoint",
    expected: Mapping[str, Any] | None = None,
) -> tuple[VJEPA2ViT, list[str]]:
    """A `VJEPA2ViT` for windows of `num_frames` frames at `img_size` px, loaded strictly from transformers'
    `VJEPA2Model` layout (or upstream's encoder names); the predictor is dropped and returned."""
    state = unwrap_state_dict(checkpoint, which)  # removes the `encoder.` prefix
    dropped = sorted(k for k in state if k.startswith(TRAINING_ONLY))
    encoder = from_transformers({k: v for k, v in state.items() if not k.startswith(TRAINING_ONLY)})
    args = vjepa2_args(encoder, find_num_heads(checkpoint), source)
    check_expected({**args, "num_frames": num_frames, "img_size": img_size}, expected, source)
    model = VJEPA2ViT(img_size=img_size, num_frames=num_frames, **args)
    load_strict(model, encoder, source)
    return model.eval(), dropped
