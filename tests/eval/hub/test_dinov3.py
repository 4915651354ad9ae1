"""DINOv3 checkpoints in Meta's, transformers' and timm's layouts give upstream's CLS feature (timm's Eva).

The reference (`dinov3_reference.py`) is DINOv3's forward written on the raw Meta-layout tensors.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import timm
import torch
from safetensors.torch import save_file

from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.architectures.dinov3 import dinov3_from_state_dict, dinov3_layout
from plstitch_eval.hub.registry import DINO_EVAL, MODELS
from tests.eval.hub import dinov3_reference as reference
from tests.eval.hub.dinov3_reference import Dims

DIMS = Dims()


def _images(height: int = 32, width: int = 48) -> torch.Tensor:
    """Non-square, so that RoPE's separate row and column normalisation is exercised."""
    return torch.randn(2, 3, height, width, generator=torch.Generator().manual_seed(1))


def _fp32_periods() -> torch.Tensor:
    head_dim = DIMS.dim // DIMS.heads
    return 100.0 ** (2 * torch.arange(head_dim // 4, dtype=torch.float32) / (head_dim // 2))


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------ layouts


def test_meta_layout_gives_the_upstream_cls_feature(tmp_path):
    """Meta's torch.hub file: 4 storage tokens, the key third of the qkv bias masked, bf16-rounded periods."""
    state = reference.meta_state()
    path = tmp_path / "dinov3_vits16_pretrain_lvd1689m.pth"
    torch.save(state, path)
    encoder = load_encoder(path)  # a bare checkpoint: recognised by its keys
    assert encoder.data_config == DINO_EVAL and encoder.is_vit and encoder.patch_size == DIMS.patch
    assert encoder.model.reg_token.shape[1] == 4 and encoder.provenance["dropped_keys"] == 1  # mask_token
    with torch.no_grad():
        _close(encoder(_images()), reference.upstream_cls(state, _images()))
        # the stored periods are used: timm's float32 schedule gives (slightly) other features
        exact = reference.upstream_cls(state, _images(), periods=_fp32_periods())
    assert not torch.equal(state["rope_embed.periods"], _fp32_periods())
    assert not torch.allclose(exact, reference.upstream_cls(state, _images()), atol=1e-6)


def test_an_unmasked_key_bias_is_kept(tmp_path):
    """SurgeNetDINO's configs train with mask_k_bias false: the key bias is real and RoPE rotates it."""
    state = reference.meta_state(Dims(storage=0), seed=2, mask_k_bias=False)
    model, dropped = dinov3_from_state_dict(state, norm_eps=1e-6)
    assert dropped == ["mask_token"] and model.reg_token is None
    with torch.no_grad():
        ours = model.forward_features(_images())[:, 0]
        _close(ours, reference.upstream_cls(state, _images(), Dims(storage=0), eps=1e-6))
        without_k = dict(state)
        for i in range(DIMS.depth):
            bias = state[f"blocks.{i}.attn.qkv.bias"].clone()
            bias[DIMS.dim : 2 * DIMS.dim] = 0
            without_k[f"blocks.{i}.attn.qkv.bias"] = bias
        dropped_k = reference.upstream_cls(without_k, _images(), Dims(storage=0), eps=1e-6)
    assert not torch.allclose(ours, dropped_k, atol=1e-3)  # dropping the key bias (timm's filter) is wrong


def test_transformers_layout_gives_the_same_feature(tmp_path):
    """facebook/dinov3-* on the Hub: DINOv3ViTModel names, q/k/v apart, RoPE periods computed (float32)."""
    meta = reference.meta_state(seed=3)
    state = reference.transformers_state(meta)
    assert dinov3_layout(state) == "transformers"
    path = tmp_path / "model.safetensors"
    save_file(state, str(path))
    encoder = load_encoder(path)
    with torch.no_grad():
        _close(encoder(_images()), reference.upstream_cls(meta, _images(), periods=_fp32_periods()))


def test_timm_layout_matches_timms_own_dinov3(tmp_path):
    """timm's registered `vit_base_patch16_dinov3` (shrunk): its state dict loads, gives timm's features."""
    timm_model = timm.create_model(
        "vit_base_patch16_dinov3", pretrained=False, num_classes=0, embed_dim=128, depth=2, num_heads=2
    ).eval()
    with torch.no_grad():
        for name, param in timm_model.named_parameters():  # non-trivial biases and norms
            param.add_(0.1 * torch.randn(param.shape, generator=torch.Generator().manual_seed(len(name))))
    path = tmp_path / "timm_dinov3.safetensors"
    save_file({k: v.contiguous() for k, v in timm_model.state_dict().items()}, str(path))
    encoder = load_encoder(path)
    images = _images(32, 32).repeat_interleave(2, -1).repeat_interleave(2, -2)  # 64 px: 4x4 patches of 16
    with torch.no_grad():
        _close(encoder(images), timm_model.forward_features(images)[:, 0])


# ---------------------------------------------------------------------------------------------- strictness


def _bad(edit) -> dict:
    state = reference.meta_state()
    edit(state)
    return state


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.pop("blocks.1.mlp.fc2.bias"), r"missing \['blocks.1.mlp.fc2.bias'\]"),
        (lambda s: s.update({"blocks.0.attn.qkv.k_norm": torch.ones(64)}), r"unexpected \['blocks.0.attn"),
        (lambda s: s.update({"cls_norm.weight": torch.ones(128)}), r"unexpected \['cls_norm.weight'\]"),
        (lambda s: s.update({"extra_tokens": torch.zeros(1, 2, 128)}), r"cannot map: \['extra_tokens'\]"),
        (lambda s: s.update({"rope_embed.periods": torch.ones(8)}), r"rope.periods \(8,\) != \(16,\)"),
        (
            lambda s: s.update({"blocks.0.attn.qkv.bias_mask": torch.full((384,), float("nan"))}),
            "never initialised",
        ),
        (
            lambda s: s.update({"blocks.0.mlp.w12.weight": torch.ones(4, 128)}),
            "SwiGLU DINOv3 ViT",
        ),
    ],
)
def test_dinov3_loads_strictly(tmp_path, edit, message):
    path = tmp_path / "bad.pth"
    torch.save({"teacher": {f"backbone.{k}": v for k, v in _bad(edit).items()}}, path)
    with pytest.raises(CheckpointError, match=message) as info:
        load_encoder(path)
    assert "\n" not in str(info.value)


def test_training_heads_are_dropped_and_listed(tmp_path):
    state = reference.meta_state(seed=4)
    checkpoint = {
        "teacher": {f"backbone.{k}": v for k, v in state.items()}
        | {"dino_head.mlp.0.weight": torch.ones(8, 128), "ibot_head.mlp.0.weight": torch.ones(8, 128)},
        "iteration": 3,
    }
    model, dropped = dinov3_from_state_dict(checkpoint)
    assert dropped == ["dino_head.mlp.0.weight", "ibot_head.mlp.0.weight", "mask_token"]
    with torch.no_grad():
        _close(model.forward_features(_images())[:, 0], reference.upstream_cls(state, _images()))


# ------------------------------------------------------------------------------------------------ registry


@pytest.mark.parametrize("size", ["s", "b", "l"])
def test_timm_entries_load_offline_from_the_cache(hf_cache, size):
    """`dinov3-vit*16`: timm's Hub repo (config.json + model.safetensors), built here at depth 1."""
    entry = MODELS[f"dinov3-vit{size}16"]
    model = timm.create_model(entry.architecture, pretrained=False, num_classes=0, depth=1).eval()
    config = {
        "architecture": entry.architecture,
        "num_classes": 0,
        "num_features": model.num_features,
        "global_pool": "avg",
        "model_args": {"depth": 1},
        "pretrained_cfg": {"input_size": [3, 256, 256], "crop_pct": 1.0, "interpolation": "bicubic"},
    }
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    hf_cache(
        entry.repo_id,
        {
            "config.json": lambda p: p.write_text(json.dumps(config)),
            "model.safetensors": lambda p: save_file(tensors, str(p)),
        },
    )
    encoder = load_encoder(entry.name)
    assert encoder.feature_dim == entry.feature_dim and encoder.data_config == DINO_EVAL
    assert encoder.provenance["repo_id"] == entry.repo_id
    images = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _close(encoder(images), model.forward_features(images)[:, 0])


def test_facebook_entry_loads_the_gated_repo_file_from_the_cache(hf_cache, monkeypatch):
    """`dinov3-vitb16-facebook`: the transformers-layout file of the gated repo, here at test size."""
    entry = MODELS["dinov3-vitb16-facebook"]
    assert entry.gated and entry.filename == "model.safetensors" and entry.license == "DINOv3 License"
    meta = reference.meta_state(seed=5)
    hf_cache(
        entry.repo_id, {"model.safetensors": lambda p: save_file(reference.transformers_state(meta), str(p))}
    )
    with pytest.raises(CheckpointError, match="embed_dim: found 128, expected 768"):
        load_encoder(entry.name)  # the entry pins ViT-B
    monkeypatch.setitem(MODELS, entry.name, dataclasses.replace(entry, expected={"embed_dim": 128}))
    encoder = load_encoder(entry.name)
    assert encoder.provenance["filename"] == "model.safetensors" and encoder.data_config == DINO_EVAL
    images = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _close(encoder(images), reference.upstream_cls(meta, images, periods=_fp32_periods()))
