"""T-CoRe (github.com/yafeng19/T-CORE) loads from its own checkpoint layouts and gives its CLS feature.

T-CoRe's backbone is DINOv2's ViT (`base_model/models/vision_transformer.py`): ViT-B/16 with 4 register tokens
and layer scale (`base_model/configs/ssl_default_config.yaml`). Its checkpoints: the eval-time teacher file
(`train.py` `do_test`: {"teacher": teacher.state_dict()}, keys `backbone.*`, `dino_head.*`) and the fvcore
training checkpoint ({"model": student.*, teacher.*, auxiliary.*; "optimizer", "iteration"}). The reference
is DINOv2's `forward_features` (`x_norm_clstoken`) written on the raw tensors.
"""

from __future__ import annotations

import dataclasses
from functools import partial

import pytest
import torch

from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.registry import DINO_EVAL, MODELS
from tests.eval.hub import dinov2_reference as reference
from tests.eval.hub.dinov2_reference import ViTDims

DIMS = ViTDims(dim=128, heads=2, depth=2, patch=16, grid=2)
DIM, DEPTH, HEADS, PATCH, GRID, REGISTERS = DIMS.dim, DIMS.depth, DIMS.heads, DIMS.patch, DIMS.grid, 4
upstream_cls = partial(reference.upstream_cls, DIMS)


def tcore_backbone(seed: int = 0, registers: int = REGISTERS) -> dict[str, torch.Tensor]:
    """Random weights named and shaped as T-CoRe's `vit_base` (DINOv2's ViT: registers, layer scale)."""
    return reference.dinov2_state(DIMS, registers=registers, seed=seed)


def teacher_checkpoint(state: dict[str, torch.Tensor]) -> dict:
    """`base_model/train/train.py` do_test: torch.save({"teacher": model.teacher.state_dict()})."""
    heads = {"dino_head.mlp.0.weight": torch.ones(16, DIM), "dino_head.last_layer.weight_g": torch.ones(8, 1)}
    return {"teacher": {f"backbone.{k}": v for k, v in state.items()} | heads}


def fvcore_checkpoint(state: dict[str, torch.Tensor]) -> dict:
    """FSDPCheckpointer's file: the whole SSLMetaArch (student, teacher, auxiliary decoder) under "model"."""
    model = {f"teacher.backbone.{k}": v for k, v in state.items()}
    model |= {f"student.backbone.{k}": v + 1.0 for k, v in state.items()}
    model |= {
        "teacher.dino_head.mlp.0.weight": torch.ones(16, DIM),
        "student.dino_head.mlp.0.weight": torch.ones(16, DIM),
    }
    model |= {"auxiliary.auxiliary_decoder.blocks.0.norm1.weight": torch.ones(DIM)}
    return {"model": model, "optimizer": {"state": {}, "param_groups": []}, "iteration": 4680}


def _images() -> torch.Tensor:
    return torch.randn(2, 3, GRID * PATCH, GRID * PATCH, generator=torch.Generator().manual_seed(1))


@pytest.fixture
def tiny_tcore(temp_entry):
    """The registry's T-CoRe entry at test size: same converter, pins and preprocessing, weights from $env."""
    entry = MODELS["t-core-vitb16"]
    return temp_entry(
        dataclasses.replace(
            entry,
            name="tiny-t-core",
            feature_dim=DIM,
            expected={**entry.expected, "embed_dim": DIM, "depth": DEPTH, "num_heads": HEADS},
            repo_id=None,
            filename=None,
            path_env="TINY_TCORE",
        )
    )


@pytest.mark.parametrize("layout", [teacher_checkpoint, fvcore_checkpoint], ids=["teacher", "fvcore"])
def test_tcore_checkpoints_give_the_upstream_cls_feature(tmp_path, monkeypatch, tiny_tcore, layout):
    state = tcore_backbone()
    path = tmp_path / "vitb16_200ep_K400.pth"
    torch.save(layout(state), path)
    monkeypatch.setenv("TINY_TCORE", str(path))
    encoder = load_encoder("tiny-t-core")
    assert encoder.model.num_reg_tokens == REGISTERS and encoder.clip is None
    # DINOv2's evaluation transform, scaled to the tiny model's 32 px (the entry's is 256 -> 224)
    assert encoder.data_config.crop_mode == "center" and encoder.data_config.interpolation == "bicubic"
    with torch.no_grad():
        features = encoder(_images())
        torch.testing.assert_close(features, upstream_cls(state, _images()), rtol=1e-4, atol=1e-4)
        without_registers = {k: v for k, v in state.items() if k != "register_tokens"}
        assert not torch.allclose(features, upstream_cls(without_registers, _images()), atol=1e-3)
    if layout is fvcore_checkpoint:
        student = load_encoder("tiny-t-core", which="student")
        with torch.no_grad():
            assert not torch.allclose(student(_images()), features, atol=1e-3)


def test_tcore_entry_pins_registers_and_vit_b(tmp_path, monkeypatch, tiny_tcore, hf_cache):
    path = tmp_path / "no_registers.pth"
    torch.save(teacher_checkpoint(tcore_backbone(registers=0)), path)
    monkeypatch.setenv("TINY_TCORE", str(path))
    with pytest.raises(CheckpointError, match="reg_tokens: found 0, expected 4"):
        load_encoder("tiny-t-core")
    # the public entry reads the authors' Hub file and refuses what is not a ViT-B/16 with 4 registers
    hf_cache(
        "yafeng19/T-CORE",
        {"ckpt/vitb16_200ep_K400.pth": lambda p: torch.save(teacher_checkpoint(tcore_backbone()), p)},
    )
    with pytest.raises(
        CheckpointError, match="vitb16_200ep_K400.pth does not have the expected architecture"
    ):
        load_encoder("t-core-vitb16")


def test_tcore_entry_cites_its_sources():
    entry = MODELS["t-core-vitb16"]
    assert entry.data_config == DINO_EVAL and entry.license == "Apache-2.0"
    assert "yafeng19/T-CORE" in entry.license_source and "vos.py" in entry.preprocessing_source
    assert entry.path_env == "PLSTITCH_TCORE_CHECKPOINT" and entry.expected["reg_tokens"] == 4
