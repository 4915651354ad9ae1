"""DINOv3 ViTs in any of their three published layouts -> timm's `Eva`, with every tensor accounted for.

Layouts (all strict; a missing, unexpected or mis-shaped tensor raises `CheckpointError` listing the keys):

- "meta": github.com/facebookresearch/dinov3 `DinoVisionTransformer` (its torch.hub `.pth` files and training
  checkpoints, e.g. SurgeNetDINO's): `storage_tokens`, `blocks.N.attn.qkv.{weight,bias,bias_mask}`,
  `blocks.N.ls{1,2}.gamma`, `rope_embed.periods`. The qkv bias is used as upstream uses it, times its
  `bias_mask` when there is one (`LinearKMaskedBias`: the key third masked out); the stored RoPE periods
  (bf16-rounded in Meta's files) replace timm's float32 schedule, so the features are upstream's.
- "transformers": Hugging Face `DINOv3ViTModel` (the gated `facebook/dinov3-*` Hub repos): `embeddings.*`,
  `layer.N.attention.{q,k,v,o}_proj`, `layer.N.layer_scale{1,2}.lambda1`, `layer.N.mlp.{up,down}_proj`.
  Its RoPE frequencies are not stored (computed in float32 from `rope_theta` 100), as timm computes them.
- "timm": timm's own `Eva` names (`reg_token`, `blocks.N.gamma_{1,2}`, `attn.q_bias`/`v_bias`).

timm's `Eva` holds the key bias as a fixed buffer (zero in timm's port: Meta's released ViT-S/B/L mask it). A
checkpoint trained with `mask_k_bias: false` (SurgeNetDINO's configs) has a real key bias, which matters
here because RoPE rotates it with the key; it is copied into that buffer, not dropped. The same goes for the
stored RoPE periods. Training-only tensors (`mask_token`, `local_cls_norm`, DINO/iBOT heads) are dropped and
returned. Only the plain-MLP ViTs (S, B, L) are supported; SwiGLU variants (S+, H+, 7B) are refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from typing import Any

import torch
from timm.layers import LayerNorm
from timm.models.eva import Eva

from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub.convert import (
    HEAD_DIM,
    check_expected,
    find_num_heads,
    load_strict,
    refuse_unmapped_tokens,
    split_backbone,
    unwrap_state_dict,
)

LAYOUTS = ("meta", "transformers", "timm")
# Meta's released S/B/L use "layernormbf16" (eps 1e-5), as do transformers' configs and timm's port;
# a checkpoint trained with `norm_layer: layernorm` (eps 1e-6) passes norm_eps=1e-6
DEFAULT_NORM_EPS = 1e-5
ROPE_TEMPERATURE = 100.0  # `pos_embed_rope_base` / `rope_theta` of every released DINOv3 ViT
META_TOP_LEVEL = {
    "cls_token",
    "storage_tokens",
    "mask_token",
    "patch_embed",
    "rope_embed",
    "blocks",
    "norm",
    "cls_norm",
    "local_cls_norm",
}
TRANSFORMERS_TOP_LEVEL = {"embeddings", "layer", "norm", "rope_embeddings"}
TIMM_TOP_LEVEL = {"cls_token", "reg_token", "patch_embed", "blocks", "norm"}
TRAINING_ONLY = {"mask_token", "embeddings.mask_token"}  # masked-image-modelling token
_SWIGLU = re.compile(r"\.mlp\.(w1|w2|w3|w12|gate_proj)\.")


def dinov3_layout(state: Mapping[str, torch.Tensor]) -> str | None:
    """Which DINOv3 layout `state` (an unwrapped state dict) is in, or None for anything else."""
    if "embeddings.patch_embeddings.weight" in state and any(".attention.q_proj." in k for k in state):
        return "transformers"
    rope_vit = "pos_embed" not in state and "patch_embed.proj.weight" in state
    if (
        "rope_embed.periods" in state
        or "storage_tokens" in state
        or (rope_vit and "blocks.0.ls1.gamma" in state)
    ):
        return "meta"
    if rope_vit and "blocks.0.gamma_1" in state:
        return "timm"
    return None


def is_dinov3_checkpoint(checkpoint: Any, which: str = "teacher") -> bool:
    """True when `checkpoint` (a training dict or state dict) holds a DINOv3 ViT in a known layout."""
    try:
        return dinov3_layout(unwrap_state_dict(checkpoint, which)) is not None
    except CheckpointError:
        return False


def _effective_qkv_bias(state: Mapping[str, torch.Tensor], key: str, source: str) -> torch.Tensor:
    """A Meta qkv bias as upstream applies it: times its `bias_mask` (LinearKMaskedBias) when stored."""
    bias = state[key]
    mask = state.get(key + "_mask")
    if mask is not None:
        if mask.shape != bias.shape:
            raise CheckpointError(
                f"{source}: {key}_mask {tuple(mask.shape)} does not match {key} {tuple(bias.shape)}."
            )
        bias = bias * mask.to(bias.dtype)
    if not torch.isfinite(bias).all():
        raise CheckpointError(
            f"{source}: {key} (times its bias_mask) is not finite; the checkpoint's mask was never "
            "initialised."
        )
    return bias


def _split_qkv_bias(out: dict, buffers: dict, block: str, bias: torch.Tensor) -> None:
    """Fused [q; k; v] bias -> Eva's `q_bias`, `v_bias` parameters and its `k_bias` buffer."""
    q_bias, k_bias, v_bias = bias.chunk(3)
    out[f"{block}.attn.q_bias"], out[f"{block}.attn.v_bias"] = q_bias, v_bias
    buffers[f"{block}.attn.k_bias"] = k_bias


def _from_meta(state: Mapping[str, torch.Tensor], source: str) -> tuple[dict, dict]:
    """Meta's `DinoVisionTransformer` names -> Eva names (+ buffers: key biases, RoPE periods)."""
    out: dict[str, torch.Tensor] = {}
    buffers: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        if key.endswith(".attn.qkv.bias_mask"):
            continue  # applied with its bias
        if m := re.fullmatch(r"(blocks\.\d+)\.attn\.qkv\.bias", key):
            _split_qkv_bias(out, buffers, m.group(1), _effective_qkv_bias(state, key, source))
        elif key == "storage_tokens":
            if tensor.shape[1]:
                out["reg_token"] = tensor
        elif key == "rope_embed.periods":
            buffers["rope.periods"] = tensor.float()
        else:
            out[re.sub(r"\.ls([12])\.gamma$", r".gamma_\1", key)] = tensor
    orphan_masks = [k for k in state if k.endswith(".bias_mask") and k.removesuffix("_mask") not in state]
    if orphan_masks:
        raise CheckpointError(f"{source}: bias masks without their bias: {orphan_masks[:10]}.")
    return out, buffers


_TRANSFORMERS_BLOCK = {
    "norm1": "norm1",
    "norm2": "norm2",
    "attention.o_proj": "attn.proj",
    "mlp.up_proj": "mlp.fc1",
    "mlp.down_proj": "mlp.fc2",
}


def _from_transformers(state: Mapping[str, torch.Tensor], source: str) -> tuple[dict, dict]:
    """Hugging Face `DINOv3ViTModel` names -> Eva names; q/k/v projections fused as timm fuses them."""
    out: dict[str, torch.Tensor] = {}
    buffers: dict[str, torch.Tensor] = {}
    blocks = sorted({int(m.group(1)) for k in state if (m := re.match(r"layer\.(\d+)\.", k))})
    used: set[str] = set()
    for i in blocks:
        attn = f"layer.{i}.attention"
        names = [f"{attn}.{p}_proj.weight" for p in "qkv"]
        if all(n in state for n in names):
            out[f"blocks.{i}.attn.qkv.weight"] = torch.cat([state[n] for n in names])
            used.update(names)
        biases = [state.get(f"{attn}.{p}_proj.bias") for p in "qkv"]
        present = [b for b in biases if b is not None]
        if present:  # a bias left out of the checkpoint (e.g. key_bias: false) is a zero bias
            filled = [b if b is not None else torch.zeros_like(present[0]) for b in biases]
            _split_qkv_bias(out, buffers, f"blocks.{i}", torch.cat(filled))
            used.update(f"{attn}.{p}_proj.bias" for p in "qkv")
    for key, tensor in state.items():
        if key in used:
            continue
        new = key
        if m := re.fullmatch(r"layer\.(\d+)\.(.+)\.(weight|bias)", key):
            part = _TRANSFORMERS_BLOCK.get(m.group(2))
            new = f"blocks.{m.group(1)}.{part}.{m.group(3)}" if part else key
        elif m := re.fullmatch(r"layer\.(\d+)\.layer_scale([12])\.lambda1", key):
            new = f"blocks.{m.group(1)}.gamma_{m.group(2)}"
        elif key == "embeddings.patch_embeddings.weight" or key == "embeddings.patch_embeddings.bias":
            new = "patch_embed.proj." + key.rsplit(".", 1)[1]
        elif key == "embeddings.cls_token":
            new = "cls_token"
        elif key == "embeddings.register_tokens":
            if not tensor.shape[1]:
                continue  # num_register_tokens 0: an empty tensor
            new = "reg_token"
        out[new] = tensor  # unknown keys keep their names and fail the strict load
    return out, buffers


def to_eva_state(
    state: Mapping[str, torch.Tensor], source: str = "checkpoint"
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], list[str]]:
    """(Eva state dict, Eva buffers to set after loading, dropped training-only keys) of a DINOv3 state."""
    layout = dinov3_layout(state)
    if layout is None:
        raise CheckpointError(
            f"{source} is not a DINOv3 ViT in a known layout (Meta's dinov3, Hugging Face transformers or "
            f"timm); its keys start with {sorted({k.split('.', 1)[0] for k in state})[:20]}."
        )
    top_level = {"meta": META_TOP_LEVEL, "transformers": TRANSFORMERS_TOP_LEVEL, "timm": TIMM_TOP_LEVEL}[
        layout
    ]
    backbone, dropped = split_backbone(state, top_level)
    refuse_unmapped_tokens(dropped, source)
    swiglu = sorted(k for k in backbone if _SWIGLU.search(k))
    if swiglu:
        raise CheckpointError(
            f"{source} is a SwiGLU DINOv3 ViT (S+, H+ or 7B: {swiglu[:3]}); only the plain-MLP ViT-S/B/L "
            "convert to timm's Eva here."
        )
    training_only = sorted(k for k in backbone if k in TRAINING_ONLY or k.startswith("local_cls_norm."))
    backbone = {k: v for k, v in backbone.items() if k not in training_only}
    convert = {"meta": _from_meta, "transformers": _from_transformers, "timm": lambda s, _: (dict(s), {})}
    out, buffers = convert[layout](backbone, source)
    return out, buffers, sorted([*dropped, *training_only])


def eva_args(
    state: Mapping[str, torch.Tensor],
    num_heads: int | None = None,
    img_size: int = 224,
    norm_eps: float = DEFAULT_NORM_EPS,
    source: str = "checkpoint",
) -> dict[str, Any]:
    """timm `Eva` arguments of a DINOv3 ViT (as timm's `vit_*_patch16_dinov3`), sized from Eva tensors."""
    proj = state.get("patch_embed.proj.weight")
    if proj is None or proj.ndim != 4 or "cls_token" not in state:
        raise CheckpointError(
            f"{source}: a DINOv3 ViT needs 'patch_embed.proj.weight' [D, 3, p, p] and 'cls_token'."
        )
    embed_dim, in_chans, patch_h, patch_w = proj.shape
    block_ids = {int(m.group(1)) for k in state if (m := re.match(r"blocks\.(\d+)\.", k))}
    fc1 = state.get("blocks.0.mlp.fc1.weight")
    if not block_ids or fc1 is None:
        raise CheckpointError(f"{source}: no 'blocks.N.*' keys with a plain MLP ('blocks.0.mlp.fc1.weight').")
    heads = num_heads or max(1, embed_dim // HEAD_DIM)
    if embed_dim % heads or (embed_dim // heads) % 4:
        raise CheckpointError(
            f"{source}: embed_dim {embed_dim} with {heads} heads does not give a head size divisible by 4, "
            "which DINOv3's 2-D RoPE needs."
        )
    return {
        "img_size": img_size,
        "patch_size": (int(patch_h), int(patch_w)),
        "in_chans": int(in_chans),
        "num_classes": 0,
        "embed_dim": int(embed_dim),
        "depth": max(block_ids) + 1,
        "num_heads": heads,
        "qkv_bias": "blocks.0.attn.q_bias" in state,
        "mlp_ratio": fc1.shape[0] / embed_dim,
        "init_values": 1e-5 if "blocks.0.gamma_1" in state else None,  # any value: the weights overwrite it
        "num_reg_tokens": int(state["reg_token"].shape[1]) if "reg_token" in state else 0,
        "use_abs_pos_emb": False,
        "use_rot_pos_emb": True,
        "rope_type": "dinov3",
        "rope_temperature": ROPE_TEMPERATURE,
        "rope_rotate_half": True,
        "use_fc_norm": False,
        "dynamic_img_size": True,
        "norm_layer": partial(LayerNorm, eps=norm_eps),
    }


def dinov3_from_state_dict(
    checkpoint: Any,
    *,
    which: str = "teacher",
    img_size: int = 224,
    norm_eps: float = DEFAULT_NORM_EPS,
    num_heads: int | None = None,
    source: str = "checkpoint",
    expected: Mapping[str, Any] | None = None,
) -> tuple[Eva, list[str]]:
    """A timm `Eva` DINOv3 ViT (CLS + registers, 2-D RoPE, layer scale) loaded strictly from any layout.

    `img_size` only sets the model's nominal input size (RoPE takes any multiple of the patch); `norm_eps` is
    the LayerNorm epsilon, which tensors cannot show. Returns (model in eval mode, dropped training keys).
    """
    state = unwrap_state_dict(checkpoint, which)
    eva_state, buffers, dropped = to_eva_state(state, source)
    args = eva_args(eva_state, num_heads or find_num_heads(checkpoint), img_size, norm_eps, source)
    pinned = {
        k: args[k] for k in ("embed_dim", "depth", "num_heads", "patch_size", "num_reg_tokens", "qkv_bias")
    }
    check_expected({**pinned, "reg_tokens": args["num_reg_tokens"]}, expected, source)
    model = Eva(**args)
    load_strict(model, eva_state, source)
    _set_buffers(model, buffers, source)
    return model.eval(), dropped


def _set_buffers(model: Eva, buffers: Mapping[str, torch.Tensor], source: str) -> None:
    """Copy the key biases and RoPE periods a checkpoint stores into Eva's non-persistent buffers."""
    for name, tensor in buffers.items():
        try:
            target = model.get_buffer(name)
        except AttributeError:
            raise CheckpointError(f"{source}: {name} has no place in the timm Eva built from it.") from None
        if target.shape != tensor.shape:
            raise CheckpointError(
                f"{source}: {name} {tuple(tensor.shape)} != {tuple(target.shape)} of the model built from it."
            )
        if name == "rope.periods" and not (tensor > 0).all():
            raise CheckpointError(f"{source}: rope_embed.periods must be positive.")
        with torch.no_grad():
            target.copy_(tensor)
