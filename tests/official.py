"""Tiny checkpoints in the layout of the authors' released `pl_*.pth`, and their heads written out by hand.

Everything here is built from the REFERENCE equations and the authors' key names, independently of
`plstitch_train`: the tensors are made by key name and shape, and `reference_*_scores` compute the heads'
outputs with explicit matrix products, so a loader that maps a key wrongly gives different scores.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import VisionTransformer
from torch import Tensor

TINY = {"dim": 32, "depth": 2, "patch": 8, "img": 32, "vit_heads": 2}
IBOT = {"out_dim": 64, "hidden": 64, "bottleneck": 32}
JIGSAW_SCALE = 4.0


def _weights(generator: torch.Generator, shapes: dict[str, tuple[int, ...]]) -> dict[str, Tensor]:
    """Random tensors by name: matrices ~ N(0, 1/fan_in), LayerNorm weights ~ 1 + N(0, 0.1), biases small."""
    out = {}
    for name, shape in shapes.items():
        noise = torch.randn(shape, generator=generator)
        if len(shape) >= 2:
            out[name] = noise / math.sqrt(shape[-1])
        elif "norm" in name and name.endswith("weight"):
            out[name] = 1 + 0.1 * noise
        else:
            out[name] = 0.1 * noise
    return out


def _attention_shapes(prefix: str, dim: int) -> dict[str, tuple[int, ...]]:
    return {
        f"{prefix}.in_proj_weight": (3 * dim, dim),
        f"{prefix}.in_proj_bias": (3 * dim,),
        f"{prefix}.out_proj.weight": (dim, dim),
        f"{prefix}.out_proj.bias": (dim,),
    }


def temporal_head_state(dim: int, n_layers: int = 1, seed: int = 0) -> dict[str, Tensor]:
    """Authors' `TemporalHead(backbone_dim=dim)` keys: hidden = dim/2, ff = 4*hidden, `n_layers` layers."""
    hidden = dim // 2
    shapes: dict[str, tuple[int, ...]] = {"reduce.0.weight": (hidden, dim), "reduce.0.bias": (hidden,)}
    for i in range(n_layers):
        layer = f"temporal.enc.layers.{i}"
        shapes |= _attention_shapes(f"{layer}.self_attn", hidden)
        shapes |= {
            f"{layer}.linear1.weight": (4 * hidden, hidden),
            f"{layer}.linear1.bias": (4 * hidden,),
            f"{layer}.linear2.weight": (hidden, 4 * hidden),
            f"{layer}.linear2.bias": (hidden,),
            f"{layer}.norm1.weight": (hidden,),
            f"{layer}.norm1.bias": (hidden,),
            f"{layer}.norm2.weight": (hidden,),
            f"{layer}.norm2.bias": (hidden,),
        }
    shapes |= {
        "scorer.0.weight": (hidden // 2, hidden),
        "scorer.0.bias": (hidden // 2,),
        "scorer.2.weight": (1, hidden // 2),
        "scorer.2.bias": (1,),
    }
    return _weights(torch.Generator().manual_seed(seed), shapes)


def puzzle_decoder_state(dim: int, seed: int = 1) -> dict[str, Tensor]:
    """Authors' `PuzzleDecoder(attn_mul=4, num_blocks=1, embed_dim=dim)` keys."""
    block = "decoder.0"
    shapes: dict[str, tuple[int, ...]] = {}
    shapes |= _attention_shapes(f"{block}.auxiliary_cross_attn", dim)
    shapes |= _attention_shapes(f"{block}.auxiliary_self_attn", dim)
    shapes |= {f"{block}.auxiliary_linear.weight": (dim, dim), f"{block}.auxiliary_linear.bias": (dim,)}
    for i in (1, 2, 3):
        shapes |= {
            f"{block}.auxiliary_layer_norm{i}.weight": (dim,),
            f"{block}.auxiliary_layer_norm{i}.bias": (dim,),
        }
    shapes |= {
        "scorer.0.weight": (dim,),  # LayerNorm
        "scorer.0.bias": (dim,),
        "scorer.1.weight": (dim, dim),
        "scorer.1.bias": (dim,),
        "scorer.3.weight": (1, dim),
        "scorer.3.bias": (1,),
    }
    state = _weights(torch.Generator().manual_seed(seed), shapes)
    state["scorer.0.weight"] = 1 + 0.1 * torch.randn(dim, generator=torch.Generator().manual_seed(seed + 7))
    return state


def ibot_head_state(dim: int, shared: bool, seed: int) -> dict[str, Tensor]:
    """iBOT head keys (`mlp.{0,2,4}`, old-style weight norm `last_layer[2].weight_g/_v`).

    `shared=True` is the teacher: its one last layer is listed under `last_layer` and again under
    `last_layer2` (the same module registered twice, as `state_dict()` writes it).
    """
    hidden, bottleneck, out = IBOT["hidden"], IBOT["bottleneck"], IBOT["out_dim"]
    shapes = {
        "mlp.0.weight": (hidden, dim),
        "mlp.0.bias": (hidden,),
        "mlp.2.weight": (hidden, hidden),
        "mlp.2.bias": (hidden,),
        "mlp.4.weight": (bottleneck, hidden),
        "mlp.4.bias": (bottleneck,),
        "last_layer.weight_v": (out, bottleneck),
        "last_layer2.weight_v": (out, bottleneck),
    }
    state = _weights(torch.Generator().manual_seed(seed), shapes)
    state["last_layer.weight_g"] = torch.ones(out, 1)  # norm_last_layer: g fixed to 1
    state["last_layer2.weight_g"] = torch.ones(out, 1)
    if shared:
        state["last_layer2.weight_v"] = state["last_layer.weight_v"]
    return state


def vit_state(seed: int, masked_embed: bool) -> dict[str, Tensor]:
    """A tiny ViT in the DINO/iBOT naming (= timm's), random non-trivial weights."""
    torch.manual_seed(seed)
    vit = VisionTransformer(
        img_size=TINY["img"],
        patch_size=TINY["patch"],
        embed_dim=TINY["dim"],
        depth=TINY["depth"],
        num_heads=TINY["vit_heads"],
        num_classes=0,
    )
    state = {k: v.detach().clone() for k, v in vit.state_dict().items()}
    generator = torch.Generator().manual_seed(seed + 100)
    for value in state.values():
        value.add_(0.05 * torch.randn(value.shape, generator=generator))
    if masked_embed:
        state["masked_embed"] = torch.randn(1, TINY["dim"], generator=generator)
    return state


def official_checkpoint(temporal_layers: int = 1, seed: int = 0) -> dict[str, Any]:
    """A tiny `pl_*.pth`-style dict: DDP-saved `student`/`teacher`/heads, optimizer, epoch, args, centres."""
    dim = TINY["dim"]

    def wrapped(backbone: dict[str, Tensor], head: dict[str, Tensor]) -> dict[str, Tensor]:
        return {f"module.backbone.{k}": v for k, v in backbone.items()} | {
            f"module.head.{k}": v for k, v in head.items()
        }

    generator = torch.Generator().manual_seed(seed + 5)
    return {
        "student": wrapped(vit_state(seed + 1, True), ibot_head_state(dim, False, seed + 2)),
        "teacher": wrapped(vit_state(seed + 3, False), ibot_head_state(dim, True, seed + 4)),
        "temporal_head": {
            f"module.{k}": v for k, v in temporal_head_state(dim, temporal_layers, seed).items()
        },
        "puzzle_decoder": {f"module.{k}": v for k, v in puzzle_decoder_state(dim, seed + 1).items()},
        "optimizer": {"state": {}, "param_groups": [{"lr": 0.0, "params": [0, 1]}]},
        "epoch": 30,
        "args": argparse.Namespace(
            arch="vit_tiny", patch_size=TINY["patch"], num_heads=TINY["vit_heads"], out_dim=IBOT["out_dim"]
        ),
        "ibot_loss": {
            "center": torch.randn(1, IBOT["out_dim"], generator=generator),
            "center2": torch.randn(1, 1, IBOT["out_dim"], generator=generator),
        },
    }


def write_official_checkpoint(path: Path, **kwargs: Any) -> dict[str, Any]:
    """`torch.save` an `official_checkpoint(...)` to `path`; returns the dict."""
    checkpoint = official_checkpoint(**kwargs)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(checkpoint, path)
    return checkpoint


def unwrap(state: dict[str, Tensor], prefix: str = "module.") -> dict[str, Tensor]:
    """Keys with `prefix` removed."""
    return {k.removeprefix(prefix): v for k, v in state.items()}


# --- the heads, written out from the equations -----------------------------------------------------------


def attention(query: Tensor, context: Tensor, state: dict[str, Tensor], prefix: str, n_heads: int) -> Tensor:
    """Multi-head attention by hand: softmax(Q K^T / sqrt(d)) V per head, then the output projection."""
    dim = query.shape[-1]
    wq, wk, wv = state[f"{prefix}.in_proj_weight"].split(dim)
    bq, bk, bv = state[f"{prefix}.in_proj_bias"].split(dim)
    batch, n, m, d = query.shape[0], query.shape[1], context.shape[1], dim // n_heads
    q = (query @ wq.T + bq).view(batch, n, n_heads, d).transpose(1, 2)
    k = (context @ wk.T + bk).view(batch, m, n_heads, d).transpose(1, 2)
    v = (context @ wv.T + bv).view(batch, m, n_heads, d).transpose(1, 2)
    weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, n, dim)
    return out @ state[f"{prefix}.out_proj.weight"].T + state[f"{prefix}.out_proj.bias"]


def _norm(x: Tensor, state: dict[str, Tensor], prefix: str) -> Tensor:
    return F.layer_norm(x, x.shape[-1:], state[f"{prefix}.weight"], state[f"{prefix}.bias"], eps=1e-5)


def _linear(x: Tensor, state: dict[str, Tensor], prefix: str) -> Tensor:
    return x @ state[f"{prefix}.weight"].T + state[f"{prefix}.bias"]


def reference_temporal_scores(state: dict[str, Tensor], frames: Tensor, n_heads: int = 8) -> Tensor:
    """h_vid: GELU(Linear) -> post-norm layers [x = LN1(x + SA(x)); x = LN2(x + W2 ReLU(W1 x))] -> scorer."""
    x = F.gelu(_linear(frames, state, "reduce.0"))
    layers = sorted({int(k.split(".")[3]) for k in state if k.startswith("temporal.enc.layers.")})
    for i in layers:
        p = f"temporal.enc.layers.{i}"
        x = _norm(x + attention(x, x, state, f"{p}.self_attn", n_heads), state, f"{p}.norm1")
        ff = _linear(F.relu(_linear(x, state, f"{p}.linear1")), state, f"{p}.linear2")
        x = _norm(x + ff, state, f"{p}.norm2")
    return _linear(F.gelu(_linear(x, state, "scorer.0")), state, "scorer.2").squeeze(-1)


def reference_jigsaw_scores(
    state: dict[str, Tensor], queries: Tensor, context: Tensor, n_heads: int
) -> Tensor:
    """h_jigsaw: x = LN1(4 CA(x, ctx) + x); x = LN2(SA(x) + x); x = LN3(Lin(x) + x); LN-Lin-GELU-Lin."""
    b = "decoder.0"
    x = queries
    x = _norm(
        JIGSAW_SCALE * attention(x, context, state, f"{b}.auxiliary_cross_attn", n_heads) + x,
        state,
        f"{b}.auxiliary_layer_norm1",
    )
    x = _norm(
        attention(x, x, state, f"{b}.auxiliary_self_attn", n_heads) + x, state, f"{b}.auxiliary_layer_norm2"
    )
    x = _norm(_linear(x, state, f"{b}.auxiliary_linear") + x, state, f"{b}.auxiliary_layer_norm3")
    x = _norm(x, state, "scorer.0")
    return _linear(F.gelu(_linear(x, state, "scorer.1")), state, "scorer.3").squeeze(-1)


def serve_from_hf_cache(
    monkeypatch: Any, cache: Path, checkpoint_file: Path, name: str = "pl_lemon.pth"
) -> None:
    """Put `checkpoint_file` into an offline HF cache as `visurg/PL-Stitch/<name>` (the registry file)."""
    import huggingface_hub

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--visurg--PL-Stitch"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)  # no trailing newline
    (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / commit / name).write_bytes(checkpoint_file.read_bytes())
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
