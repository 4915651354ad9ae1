"""Training checkpoints (DINO/iBOT/PL-Stitch/MAE, LemonFM) -> timm models, with every backbone tensor loaded.

Unwraps `teacher`/`student`/`model`/`state_dict` containers and `module.`/`backbone.`/`teacher.`/`encoder.`
prefixes, infers the architecture from tensor shapes, and loads strictly. Keys outside the backbone (iBOT
`masked_embed`, projection/temporal/jigsaw heads) are dropped and listed at debug level; a missing or
unexpected backbone key raises `CheckpointError` listing the keys. There is no partial load.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Mapping
from typing import Any

import torch
from timm.layers import SwiGLUPacked
from timm.models.convnext import ConvNeXt
from timm.models.vision_transformer import VisionTransformer, checkpoint_filter_fn
from torch import nn

from plstitch_eval.errors import CheckpointError
from plstitch_eval.utils.console import logger

CONTAINER_KEYS = ("state_dict", "model", "model_state", "module", "net")
STRIP_PREFIXES = ("module.", "_orig_mod.", "backbone.", "encoder.", "model.", "teacher.", "student.")
VIT_TOP_LEVEL = {
    "cls_token",
    "pos_embed",
    "reg_token",
    "patch_embed",
    "blocks",
    "norm",
    "fc_norm",
    "norm_pre",
}
CONVNEXT_TOP_LEVEL = {"stem", "stages", "features", "classifier", "norm_pre"}
HEAD_DIM = 64  # ViT-S/B/L all use 64-d heads: heads = embed_dim / 64
DINOV2_KEYS = {"register_tokens", "mask_token"}  # top-level tensors only DINOv2's own ViT has
TRAINING_ONLY_TOKENS = {"mask_token", "masked_embed"}  # masking tokens: used in training, never at inference
_HEADS_KEYS = ("num_heads", "heads", "n_heads")


def _is_state_dict(obj: Any) -> bool:
    return isinstance(obj, Mapping) and bool(obj) and all(isinstance(v, torch.Tensor) for v in obj.values())


def unwrap_state_dict(checkpoint: Any, which: str = "teacher") -> dict[str, torch.Tensor]:
    """Find the tensor dict inside a training checkpoint: prefer `which`, then state_dict/model containers."""
    if which not in ("teacher", "student"):
        raise CheckpointError(f"which={which!r} is not supported; use 'teacher' or 'student'.")
    path: list[str] = []
    obj = checkpoint
    for _ in range(6):
        if _is_state_dict(obj):
            break
        if not isinstance(obj, Mapping):
            raise CheckpointError(
                f"Checkpoint entry {'/'.join(path) or '<root>'} is a {type(obj).__name__}, "
                "not a dict of tensors."
            )
        other = "student" if which == "teacher" else "teacher"
        if which not in obj and isinstance(obj.get(other), Mapping):
            raise CheckpointError(
                f"Checkpoint entry {'/'.join(path) or '<root>'} holds a {other} but no {which}; "
                f"load it with which={other!r} (`--which {other}`)."
            )
        key = next((k for k in (which, *CONTAINER_KEYS) if isinstance(obj.get(k), Mapping)), None)
        if key is None:
            tensors = {k: v for k, v in obj.items() if isinstance(v, torch.Tensor)}
            if tensors and any(_top(k) in VIT_TOP_LEVEL | CONVNEXT_TOP_LEVEL for k in _strip_all(tensors)):
                obj = tensors  # a state dict with a few non-tensor extras next to it
                break
            raise CheckpointError(
                f"No state dict found under {'/'.join(path) or '<root>'}; "
                f"keys there: {sorted(map(str, obj))[:20]}. "
                f"Expected one of {(which, *CONTAINER_KEYS)} or a dict of tensors."
            )
        path.append(key)
        obj = obj[key]
    else:
        raise CheckpointError("Checkpoint is nested too deeply to find its state dict.")
    state = dict(obj)
    state = _select_branch(state, which)
    return _strip_all(state)


def _select_branch(state: dict[str, torch.Tensor], which: str) -> dict[str, torch.Tensor]:
    """A flat dict holding both `teacher.*` and `student.*` keys: keep only the requested branch."""

    def head(key: str) -> str:
        return _strip_leading(key, ("module.", "_orig_mod.")).split(".", 1)[0]

    branches = {head(k) for k in state} & {"teacher", "student"}
    if not branches:
        return state
    if which not in branches:
        raise CheckpointError(f"Checkpoint has {sorted(branches)} weights but which={which!r} was asked for.")
    return {k: v for k, v in state.items() if head(k) == which}


def _strip_leading(key: str, prefixes: tuple[str, ...]) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in prefixes:
            if key.startswith(prefix):
                key, changed = key[len(prefix) :], True
    return key


def _strip_all(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Remove wrapper prefixes; if some keys sit under `backbone.`, only those are renamed (heads keep names).

    A prefixed key that would overwrite an unprefixed one keeps its name (so it is dropped later); this makes
    the function idempotent on its own output. Two prefixed keys mapping to one name are an error.
    """
    has_backbone = any(_backbone_prefixed(k) for k in state)
    plain = set(state)
    out: dict[str, torch.Tensor] = {}
    for key, tensor in state.items():
        keep = has_backbone and not _backbone_prefixed(key)
        new = key if keep else _strip_leading(key, STRIP_PREFIXES)
        if new != key and new in plain:
            new = key
        if new in out:
            raise CheckpointError(
                f"Keys collide after removing prefixes: {key!r} and another map to {new!r}."
            )
        out[new] = tensor
    return out


def _backbone_prefixed(key: str) -> bool:
    """True for `backbone.x` under any chain of wrapper prefixes (`module.teacher.backbone.x`)."""
    wrappers = tuple(p for p in STRIP_PREFIXES if p != "backbone.")
    return _strip_leading(key, wrappers).startswith("backbone.")


def _top(key: str) -> str:
    return key.split(".", 1)[0]


def describe_keys(state: Mapping[str, Any], limit: int = 8) -> str:
    """`it holds 62 tensors: conv1.weight, bn1.weight, ... (top-level names: bn1, conv1, fc, layer1, ...)`."""
    keys = list(state)
    if not keys:
        return "it holds no tensors"
    tops = sorted({_top(k) for k in keys})
    shown = ", ".join(keys[:limit]) + (", ..." if len(keys) > limit else "")
    named = ", ".join(tops[:20]) + (", ..." if len(tops) > 20 else "")
    return f"it holds {len(keys)} tensors: {shown} (top-level names: {named})"


def split_backbone(state: Mapping[str, torch.Tensor], top_level: set[str]) -> tuple[dict, list[str]]:
    """(backbone tensors, dropped training-only keys) by the key's first component."""
    backbone = {k: v for k, v in state.items() if _top(k) in top_level}
    dropped = sorted(k for k in state if _top(k) not in top_level)
    if dropped:
        logger.debug("Dropped %d training-only keys: %s", len(dropped), ", ".join(dropped))
    return backbone, dropped


def find_num_heads(checkpoint: Any) -> int | None:
    """`num_heads` recorded next to the weights (args Namespace or a config/model_args dict), if any."""
    if not isinstance(checkpoint, Mapping):
        return None
    for container in ("model_args", "backbone_args", "config", "args", "hparams"):
        meta = checkpoint.get(container)
        if isinstance(meta, argparse.Namespace):
            meta = vars(meta)
        if isinstance(meta, Mapping):
            for key in _HEADS_KEYS:
                if isinstance(meta.get(key), int):
                    return int(meta[key])
            nested = find_num_heads(meta)
            if nested:
                return nested
    return None


def infer_vit_args(state: Mapping[str, torch.Tensor], num_heads: int | None = None) -> dict[str, Any]:
    """timm VisionTransformer arguments from tensor shapes (dim, depth, patch, grid, mlp ratio, heads)."""
    for needed in ("patch_embed.proj.weight", "pos_embed"):
        if needed not in state:
            raise CheckpointError(
                f"Not a ViT checkpoint: {needed!r} is missing; keys start with "
                f"{sorted({_top(k) for k in state})}."
            )
    proj = state["patch_embed.proj.weight"]
    embed_dim, in_chans, patch_h, patch_w = proj.shape
    block_ids = {int(m.group(1)) for k in state if (m := re.match(r"blocks\.(\d+)\.", k))}
    if not block_ids:
        raise CheckpointError(
            "ViT checkpoint has no 'blocks.N.*' keys; "
            f"its keys start with {sorted({_top(k) for k in state})}."
        )
    has_cls = "cls_token" in state
    registers = state["reg_token"].shape[1] if "reg_token" in state else 0
    positions = state["pos_embed"].shape[1]
    # timm: pos_embed covers CLS + registers + patches, or patches only (no_embed_class)
    no_embed_class = bool(registers) and _is_square(positions) and not _is_square(positions - registers - 1)
    num_patches = positions - (0 if no_embed_class else int(has_cls) + registers)
    grid = math.isqrt(max(num_patches, 0))
    if grid * grid != num_patches:
        raise CheckpointError(
            f"pos_embed has {positions} positions, which with {int(has_cls)} CLS and {registers} register "
            "tokens is not a square grid of patches."
        )
    fc1 = state.get("blocks.0.mlp.fc1.weight")
    heads = num_heads or max(1, embed_dim // HEAD_DIM)
    if embed_dim % heads:
        raise CheckpointError(f"embed_dim {embed_dim} is not divisible by num_heads {heads}; pass num_heads.")
    return {
        "img_size": (grid * patch_h, grid * patch_w),
        "patch_size": (patch_h, patch_w),
        "in_chans": in_chans,
        "embed_dim": embed_dim,
        "depth": max(block_ids) + 1,
        "num_heads": heads,
        "mlp_ratio": (fc1.shape[0] / embed_dim) if fc1 is not None else 4.0,
        "qkv_bias": "blocks.0.attn.qkv.bias" in state,
        "class_token": has_cls,
        "global_pool": "token" if has_cls else "avg",
        "init_values": 1e-5 if "blocks.0.ls1.gamma" in state else None,
        "reg_tokens": registers,
        "no_embed_class": no_embed_class,
        "num_classes": 0,
    }


def _is_square(n: int) -> bool:
    return n > 0 and math.isqrt(n) ** 2 == n


def state_dict_mismatch(
    expected: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor]
) -> tuple[list[str], list[str], list[str]]:
    """Keys of `state` that would not fill `expected` exactly: (missing, unexpected, wrong shape), sorted.

    Why: every strict load in the package reports the same three lists before `load_state_dict` runs.
    """
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong_shape = sorted(k for k in set(expected) & set(state) if state[k].shape != expected[k].shape)
    return missing, unexpected, wrong_shape


def load_strict(model: nn.Module, state: Mapping[str, torch.Tensor], source: str = "checkpoint") -> None:
    """`load_state_dict(strict=True)` with a `CheckpointError` listing missing/unexpected/mis-shaped keys."""
    expected = model.state_dict()
    missing, unexpected, wrong = state_dict_mismatch(expected, state)
    wrong_shape = [f"{k} {tuple(state[k].shape)} != {tuple(expected[k].shape)}" for k in wrong]
    if missing or unexpected or wrong_shape:
        raise CheckpointError(
            f"{source} does not fill the {type(model).__name__} exactly: missing {missing[:30]}, "
            f"unexpected {unexpected[:30]}, wrong shape {wrong_shape[:30]}. Nothing was loaded."
        )
    model.load_state_dict(state, strict=True)


def check_expected(inferred: dict[str, Any], expected: Mapping[str, Any] | None, source: str) -> None:
    """Compare inferred sizes with those a registry entry promises (catches a dropped last block)."""
    wrong = {
        k: (inferred.get(k), v)
        for k, v in (expected or {}).items()
        if _as_tuple(inferred.get(k)) != _as_tuple(v)
    }
    if wrong:
        detail = ", ".join(f"{k}: found {got}, expected {want}" for k, (got, want) in wrong.items())
        raise CheckpointError(
            f"{source} does not have the expected architecture ({detail}). Nothing was loaded."
        )


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple) else value


def vit_from_state_dict(
    state_dict: Any,
    which: str = "teacher",
    num_heads: int | None = None,
    source: str = "checkpoint",
    expected: Mapping[str, Any] | None = None,
) -> tuple[VisionTransformer, list[str]]:
    """A timm ViT (LayerNorm eps 1e-6, no classifier) sized from `state_dict` and loaded strictly.

    Accepts a raw training checkpoint too (containers and prefixes are removed).
    Heads = embed_dim / 64 (at least 1) unless `num_heads` is given or recorded in the checkpoint
    (`model_args`/`config`/`args`).
    Returns (model in eval mode, dropped training-only keys).
    """
    num_heads = num_heads or find_num_heads(state_dict)
    state = unchunk_blocks(unwrap_state_dict(state_dict, which))
    is_dinov2 = bool(DINOV2_KEYS & set(state))
    backbone, dropped = split_backbone(state, VIT_TOP_LEVEL | (DINOV2_KEYS if is_dinov2 else set()))
    refuse_unmapped_tokens(dropped, source)
    if "patch_embed.proj.weight" not in backbone:  # told with the file's own keys, not the ViT ones it lacks
        raise CheckpointError(
            f"{source} is not a ViT or ConvNeXt checkpoint ('patch_embed.proj.weight' is missing): "
            f"{describe_keys(state)}; pass a ViT or ConvNeXt checkpoint, or a registry name "
            "(`plstitch models`)."
        )
    args = infer_vit_args(backbone, num_heads)
    if is_dinov2:
        args.update(dinov2_vit_args(backbone))
    check_expected(args, expected, source)
    model = VisionTransformer(**args)
    if is_dinov2:
        dropped = sorted([*dropped, *({"mask_token"} & set(backbone))])
        backbone = dinov2_to_timm(backbone, model)
    load_strict(model, backbone, source)
    return model.eval(), dropped


def unchunk_blocks(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """DINOv2's FSDP block chunks (`blocks.<chunk>.<i>.*`, i is the global index) -> `blocks.<i>.*`."""
    chunked = re.compile(r"blocks\.\d+\.(\d+)\.")
    if not any(chunked.match(k) for k in state):
        return dict(state)
    return {chunked.sub(r"blocks.\1.", k, count=1): v for k, v in state.items()}


def refuse_unmapped_tokens(dropped: list[str], source: str) -> None:
    """Extra tokens (registers under a name we do not know) change the CLS feature: refuse, never drop."""
    tokens = [k for k in dropped if "token" in _top(k) and _top(k) not in TRAINING_ONLY_TOKENS]
    if tokens:
        raise CheckpointError(
            f"{source} has token tensors this loader cannot map: {tokens}. Dropping them would change "
            "the features; convert the checkpoint to timm's layout (cls_token, reg_token, pos_embed)."
        )


def dinov2_vit_args(state: Mapping[str, torch.Tensor]) -> dict[str, Any]:
    """timm arguments for facebookresearch/dinov2's ViT: registers (no pos. embedding), SwiGLU for ViT-g."""
    args: dict[str, Any] = {}
    if "register_tokens" in state:
        # timm's DINOv2-with-registers layout: pos_embed covers patches only, the CLS one is folded in
        args.update(reg_tokens=state["register_tokens"].shape[1], no_embed_class=True)
    if "blocks.0.mlp.w12.weight" in state:  # SwiGLUFFNFused: w12 = [gate; value], w3 = output
        embed_dim = state["patch_embed.proj.weight"].shape[0]
        hidden = state["blocks.0.mlp.w12.weight"].shape[0]
        args.update(mlp_layer=SwiGLUPacked, act_layer=nn.SiLU, mlp_ratio=hidden / embed_dim)
    return args


def dinov2_to_timm(state: Mapping[str, torch.Tensor], model: VisionTransformer) -> dict[str, torch.Tensor]:
    """timm's DINOv2 key mapping (`checkpoint_filter_fn`); it recognises the layout by its mask token."""
    state = dict(state)
    state.setdefault("mask_token", torch.zeros(1, state["cls_token"].shape[-1]))
    return checkpoint_filter_fn(state, model)


def _torchvision_convnext_to_timm(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename torchvision ConvNeXt keys (features.*, classifier.*) to timm's (stem.*, stages.*, head.*)."""
    out: dict[str, torch.Tensor] = {}
    block_parts = {"block.0": "conv_dw", "block.2": "norm", "block.3": "mlp.fc1", "block.5": "mlp.fc2"}
    for key, tensor in state.items():
        new = None
        if m := re.fullmatch(r"features\.0\.([01])\.(weight|bias)", key):
            new = f"stem.{m.group(1)}.{m.group(2)}"
        elif m := re.fullmatch(r"features\.(\d+)\.(\d+)\.(block\.\d)\.(weight|bias)", key):
            index = int(m.group(1))
            if index % 2 == 1 and m.group(3) in block_parts:
                new = f"stages.{(index - 1) // 2}.blocks.{m.group(2)}.{block_parts[m.group(3)]}.{m.group(4)}"
        elif m := re.fullmatch(r"features\.(\d+)\.(\d+)\.layer_scale", key):
            if int(m.group(1)) % 2 == 1:
                new = f"stages.{(int(m.group(1)) - 1) // 2}.blocks.{m.group(2)}.gamma"
                tensor = tensor.reshape(-1)
        elif m := re.fullmatch(r"features\.(\d+)\.([01])\.(weight|bias)", key):
            index = int(m.group(1))
            if index % 2 == 0 and index > 0:
                new = f"stages.{index // 2}.downsample.{m.group(2)}.{m.group(3)}"
        elif m := re.fullmatch(r"classifier\.0\.(weight|bias)", key):
            new = f"head.norm.{m.group(1)}"
        elif key.startswith("classifier."):
            continue  # the ImageNet classifier; features are taken before it
        out[new or key] = tensor  # unknown keys stay as they are and fail the strict load
    return out


def convnext_from_state_dict(
    state_dict: Any,
    which: str = "teacher",
    source: str = "checkpoint",
    expected: Mapping[str, Any] | None = None,
) -> tuple[ConvNeXt, list[str]]:
    """A timm ConvNeXt (e.g. LemonFM's torchvision ConvNeXt-Large, 1536-d) sized from tensors, strict load.

    torchvision's ConvNeXt and timm's compute the same function (LayerNorm eps 1e-6, exact GELU, layer scale),
    so the weights are renamed and the features are avg-pool -> LayerNorm, as torchvision's classifier[0].
    """
    state = unwrap_state_dict(state_dict, which)
    if any(k.startswith("features.") for k in state):  # torchvision naming; `head.*` is a training head
        backbone, dropped = split_backbone(state, {"features", "classifier"})
        backbone = _torchvision_convnext_to_timm(backbone)
    else:  # timm naming: only head.norm belongs to the backbone
        backbone, dropped = split_backbone(state, {"stem", "stages", "norm_pre", "head"})
        extra = sorted(k for k in backbone if k.startswith("head.") and not k.startswith("head.norm."))
        backbone = {k: v for k, v in backbone.items() if k not in extra}
        dropped = sorted(dropped + extra)
    if "stem.0.weight" not in backbone:
        raise CheckpointError(
            "Not a ConvNeXt checkpoint: stem conv ('features.0.0.weight' / 'stem.0.weight') missing."
        )
    depths, dims = [], []
    stage_ids = sorted({int(m.group(1)) for k in backbone if (m := re.match(r"stages\.(\d+)\.", k))})
    for stage in range(max(stage_ids, default=-1) + 1):
        block_ids = {
            int(m.group(1)) for k in backbone if (m := re.match(rf"stages\.{stage}\.blocks\.(\d+)\.", k))
        }
        dw = backbone.get(f"stages.{stage}.blocks.0.conv_dw.weight")
        if dw is None:
            raise CheckpointError(f"ConvNeXt stage {stage} has no blocks.0.conv_dw.weight in {source}.")
        depths.append(max(block_ids) + 1)
        dims.append(dw.shape[0])
    if len(depths) != 4:
        raise CheckpointError(f"ConvNeXt in {source} has {len(depths)} stages; timm's ConvNeXt needs 4.")
    check_expected({"depths": depths, "dims": dims}, expected, source)
    has_gamma = any(k.endswith(".gamma") for k in backbone)
    model = ConvNeXt(
        in_chans=backbone["stem.0.weight"].shape[1],
        depths=depths,
        dims=dims,
        num_classes=0,
        ls_init_value=1e-6 if has_gamma else None,
        patch_size=backbone["stem.0.weight"].shape[-1],
    )
    if "head.norm.weight" not in backbone:
        model.head.norm = nn.Identity()  # a backbone saved without torchvision's classifier LayerNorm
        logger.debug("ConvNeXt checkpoint has no head norm; features are the plain average pool.")
    load_strict(model, backbone, source)
    return model.eval(), dropped


def is_convnext_state(state: Mapping[str, torch.Tensor]) -> bool:
    """True for torchvision (`features.0.0.weight`) or timm (`stem.0.weight` + `stages.`) ConvNeXt keys."""
    return any(k in state for k in ("features.0.0.weight", "stem.0.weight"))


def model_from_checkpoint(
    checkpoint: Any,
    which: str = "teacher",
    num_heads: int | None = None,
    source: str = "checkpoint",
    expected: Mapping[str, Any] | None = None,
) -> tuple[nn.Module, list[str]]:
    """Dispatch on the keys: ConvNeXt or ViT (the only two layouts we publish or evaluate).

    `expected` (e.g. {"depth": 12, "embed_dim": 768}) pins sizes that shapes alone cannot prove.
    """
    if is_convnext_state(unwrap_state_dict(checkpoint, which)):  # unwrapping is cheap: no tensor copies
        return convnext_from_state_dict(checkpoint, which, source, expected)
    return vit_from_state_dict(checkpoint, which, num_heads, source, expected)
