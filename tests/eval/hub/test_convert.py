import argparse

import pytest
import torch
import torch.nn.functional as F

from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub import convnext_from_state_dict, vit_from_state_dict
from plstitch_eval.hub.convert import model_from_checkpoint
from tests.eval.hub.conftest import make_tiny_tv_convnext, make_tiny_vit


def reference_vit_cls(state: dict, x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """Textbook pre-norm ViT forward from raw tensors (LayerNorm eps 1e-6), CLS after the final norm."""

    def ln(t, prefix):
        return F.layer_norm(t, t.shape[-1:], state[f"{prefix}.weight"], state[f"{prefix}.bias"], eps=1e-6)

    def lin(t, prefix):
        return t @ state[f"{prefix}.weight"].T + state[f"{prefix}.bias"]

    patch = state["patch_embed.proj.weight"].shape[-1]
    tokens = F.conv2d(x, state["patch_embed.proj.weight"], state["patch_embed.proj.bias"], stride=patch)
    tokens = tokens.flatten(2).transpose(1, 2)
    tokens = torch.cat([state["cls_token"].expand(len(x), -1, -1), tokens], 1) + state["pos_embed"]
    depth = 1 + max(int(k.split(".")[1]) for k in state if k.startswith("blocks."))
    batch, length, dim = tokens.shape
    head_dim = dim // num_heads
    for i in range(depth):
        p = f"blocks.{i}"
        qkv = lin(ln(tokens, f"{p}.norm1"), f"{p}.attn.qkv").reshape(batch, length, 3, num_heads, head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn = torch.softmax(q @ k.transpose(-1, -2) / head_dim**0.5, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(batch, length, dim)
        tokens = tokens + lin(out, f"{p}.attn.proj")
        hidden = F.gelu(lin(ln(tokens, f"{p}.norm2"), f"{p}.mlp.fc1"))
        tokens = tokens + lin(hidden, f"{p}.mlp.fc2")
    return ln(tokens, "norm")[:, 0]


def training_checkpoint(state: dict) -> dict:
    """A DINO/iBOT/PL-Stitch-style training dict: teacher/student with `module.backbone.` and heads."""

    def wrap(prefix):
        out = {f"{prefix}backbone.{k}": v.clone() for k, v in state.items()}
        out[f"{prefix}backbone.masked_embed"] = torch.zeros(1, 64)
        out[f"{prefix}head.mlp.0.weight"] = torch.randn(8, 64)
        out[f"{prefix}head.last_layer.weight_g"] = torch.randn(8, 1)
        out[f"{prefix}encoder.norm.weight"] = torch.randn(64)  # a head named `encoder` must not clash
        return out

    student = wrap("module.")
    student["module.backbone.norm.bias"] = student["module.backbone.norm.bias"] + 1.0  # differs from teacher
    return {
        "teacher": wrap("module."),
        "student": student,
        "temporal_head": {"scorer.0.weight": torch.randn(4, 4)},
        "optimizer": {"state": {}, "param_groups": []},
        "epoch": 7,
        "args": argparse.Namespace(arch="vit_tiny", patch_size=8),
    }


@pytest.fixture(scope="module")
def tiny():
    model = make_tiny_vit()
    return model, {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize(
    "layout",
    ["plain", "training", "model_container", "state_dict_prefixed", "flat_teacher_student", "mae_like"],
)
def test_vit_layouts_match_reference(tiny, layout):
    _, state = tiny
    checkpoint = {
        "plain": state,
        "training": training_checkpoint(state),
        "model_container": {"model": state, "epoch": 1},
        "state_dict_prefixed": {"state_dict": {f"encoder.{k}": v for k, v in state.items()}},
        "flat_teacher_student": {f"teacher.{k}": v for k, v in state.items()}
        | {f"student.{k}": v + 1 for k, v in state.items()},
        "mae_like": {
            "model": state | {"mask_token": torch.zeros(1, 1, 32), "decoder_embed.weight": torch.ones(2, 2)}
        },
    }[layout]
    model, dropped = vit_from_state_dict(checkpoint, which="teacher")
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        expected = reference_vit_cls(state, x, num_heads=1)
        assert torch.allclose(model.forward_features(x)[:, 0], expected, atol=1e-5)
    if layout == "training":
        assert set(dropped) == {
            "masked_embed",
            "module.head.mlp.0.weight",
            "module.head.last_layer.weight_g",
            "module.encoder.norm.weight",
        }
    if layout == "mae_like":
        assert set(dropped) == {"mask_token", "decoder_embed.weight"}


def test_student_branch_is_selectable(tiny):
    _, state = tiny
    teacher, _ = vit_from_state_dict(training_checkpoint(state), which="teacher")
    student, _ = vit_from_state_dict(training_checkpoint(state), which="student")
    assert torch.equal(teacher.norm.bias, state["norm.bias"])
    assert torch.equal(student.norm.bias, state["norm.bias"] + 1.0)


def test_inferred_sizes_and_heads_from_metadata():
    model = make_tiny_vit(embed_dim=32, num_heads=2, depth=3, patch_size=4, img_size=16, mlp_ratio=2.0)
    state = model.state_dict()
    loaded, _ = vit_from_state_dict({"model": state, "model_args": {"num_heads": 2}})
    assert len(loaded.blocks) == 3 and loaded.embed_dim == 32 and loaded.patch_embed.patch_size == (4, 4)
    assert loaded.patch_embed.img_size == (16, 16) and loaded.blocks[0].attn.num_heads == 2
    assert loaded.blocks[0].mlp.fc1.out_features == 64
    x = torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        assert torch.allclose(loaded.forward_features(x)[:, 0], reference_vit_cls(state, x, 2), atol=1e-5)
    default, _ = vit_from_state_dict(state)  # dim 32 < 64: one head unless told otherwise
    assert default.blocks[0].attn.num_heads == 1


def test_missing_block_raises_and_lists_keys(tiny):
    _, state = tiny
    broken = {k: v for k, v in state.items() if not k.startswith("blocks.0.")}
    with pytest.raises(CheckpointError, match=r"missing \[.*blocks\.0\.attn\.proj\.bias"):
        vit_from_state_dict({"teacher": broken})


def test_renamed_key_raises(tiny):
    _, state = tiny
    renamed = dict(state)
    renamed["blocks.1.attn.qkv_renamed.weight"] = renamed.pop("blocks.1.attn.qkv.weight")
    with pytest.raises(CheckpointError) as info:
        vit_from_state_dict(renamed)
    assert "blocks.1.attn.qkv.weight" in str(info.value) and "qkv_renamed" in str(info.value)


def test_unmatched_prefix_never_loads_partially(tiny):
    _, state = tiny
    stem = {k: state[k] for k in ("pos_embed", "patch_embed.proj.weight")}
    with pytest.raises(CheckpointError, match="blocks"):
        vit_from_state_dict({f"net.{k}": v for k, v in state.items()} | stem)
    with pytest.raises(CheckpointError, match="missing"):  # a depth-2 model whose block 0 lost its prefix
        vit_from_state_dict({(f"net.{k}" if k.startswith("blocks.0.") else k): v for k, v in state.items()})
    with pytest.raises(CheckpointError, match="No state dict found"):
        vit_from_state_dict({"weights": [1, 2, 3]})


def test_wrong_branch_raises(tiny):
    _, state = tiny
    with pytest.raises(CheckpointError, match="student"):
        vit_from_state_dict({f"teacher.{k}": v for k, v in state.items()}, which="student")


def reference_convnext_features(model, x):
    """torchvision's own forward up to its classifier's LayerNorm (avg-pool -> LayerNorm2d -> flatten)."""
    pooled = model.avgpool(model.features(x))
    return model.classifier[1](model.classifier[0](pooled))


def test_lemonfm_style_convnext_matches_torchvision():
    tv_model = make_tiny_tv_convnext()
    checkpoint = {
        "teacher": {f"backbone.{k}": v.clone() for k, v in tv_model.state_dict().items()}
        | {"head.mlp.0.weight": torch.randn(4, 4)},
        "student": {},
        "epoch": 3,
    }
    model, dropped = model_from_checkpoint(checkpoint)
    assert dropped == ["head.mlp.0.weight"]
    assert model.num_features == 32
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        ours = model.forward_head(model.forward_features(x), pre_logits=True)
        assert torch.allclose(ours, reference_convnext_features(tv_model, x), atol=1e-5)


def test_convnext_missing_block_raises():
    state = make_tiny_tv_convnext().state_dict()
    first = {k: v for k, v in state.items() if not k.startswith("features.3.0.")}
    with pytest.raises(CheckpointError, match="stage 1"):
        convnext_from_state_dict(first)
    partial_block = {k: v for k, v in state.items() if k != "features.3.1.block.3.weight"}
    with pytest.raises(CheckpointError, match=r"missing \['stages.1.blocks.1.mlp.fc1.weight'\]"):
        convnext_from_state_dict(partial_block)
    last = {k: v for k, v in state.items() if not k.startswith("features.3.1.")}
    with pytest.raises(CheckpointError, match="depths: found"):  # shapes alone cannot show a lost last block
        convnext_from_state_dict(last, expected={"depths": [1, 2, 1, 1], "dims": [8, 16, 24, 32]})


def test_vit_lost_last_block_caught_by_expected_sizes(tiny):
    _, state = tiny
    last = {k: v for k, v in state.items() if not k.startswith("blocks.1.")}
    with pytest.raises(CheckpointError, match="depth: found 1, expected 2"):
        vit_from_state_dict(last, expected={"depth": 2, "embed_dim": 64})


def test_unwrapping_is_idempotent(tiny):
    from plstitch_eval.hub.convert import VIT_TOP_LEVEL, split_backbone, unwrap_state_dict

    once = unwrap_state_dict(training_checkpoint(tiny[1]))
    backbone_once, dropped_once = split_backbone(once, VIT_TOP_LEVEL)
    backbone_twice, dropped_twice = split_backbone(unwrap_state_dict(once), VIT_TOP_LEVEL)
    assert list(backbone_twice) == list(backbone_once) == list(tiny[1])
    assert all(backbone_twice[k] is backbone_once[k] for k in backbone_once)
    assert len(dropped_twice) == len(dropped_once) == 4
    assert "module.encoder.norm.weight" in once and torch.equal(once["norm.weight"], tiny[1]["norm.weight"])
