"""The 2026 baselines (issue 31): SurgeNetDINO and VideoMAE V2-L load offline from a Hub cache built here,
`plstitch models` lists every new entry with its licence, the `2026` benchmark collection, gated repos.

Each entry is loaded under its real repo id and file name; the test weights are small, so the architecture
pin (`expected`) is first shown to refuse them and then relaxed to the test sizes for the load itself.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from safetensors.torch import save_file
from timm.models.vision_transformer import VisionTransformer
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.registry import MODELS, VIDEOMAE_V2_CLIP
from tests.eval.hub import dinov2_reference, dinov3_reference
from tests.eval.hub.dinov2_reference import ViTDims
from tests.eval.hub.dinov3_reference import Dims
from tests.eval.hub.test_clip_models import videomae_state

runner = CliRunner()
NEW_ENTRIES = {
    "dinov3-vits16": "DINOv3 License",
    "dinov3-vitb16": "DINOv3 License",
    "dinov3-vitl16": "DINOv3 License",
    "dinov3-vits16-facebook": "DINOv3 License",
    "dinov3-vitb16-facebook": "DINOv3 License",
    "dinov3-vitl16-facebook": "DINOv3 License",
    "surgenet-dinov1-vits16": "CC-BY-NC-SA-4.0",
    "surgenet-dinov1-vitb16": "CC-BY-NC-SA-4.0",
    "surgenet-dinov2-vits14": "CC-BY-NC-SA-4.0",
    "surgenet-dinov2-vitb14": "CC-BY-NC-SA-4.0",
    "surgenet-dinov2-vitl14": "CC-BY-NC-SA-4.0",
    "surgenet-dinov3-vits16": "CC-BY-NC-SA-4.0",
    "surgenet-dinov3-vitb16": "CC-BY-NC-SA-4.0",
    "surgenet-dinov3-vitl16": "CC-BY-NC-SA-4.0",
    "vjepa2-vitl16": "Apache-2.0",
    "videomaev2-vitl16": "CC-BY-NC-4.0",
}


def _relax(monkeypatch, name: str, **expected) -> None:
    """The entry as registered, with its size pin set to the test model's sizes (restored after the test)."""
    monkeypatch.setitem(MODELS, name, dataclasses.replace(MODELS[name], expected=expected))


def _images(size: int) -> torch.Tensor:
    return torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(3))


# ------------------------------------------------------------------------------------------- SurgeNetDINO


def test_surgenet_entries_name_the_authors_files():
    """File names from the SurgeNetDINO README download table and load_models.py."""
    assert {name: MODELS[name].filename for name in NEW_ENTRIES if name.startswith("surgenet")} == {
        "surgenet-dinov1-vits16": "DINOv1_ViTs16_size224_SurgeNetXL.pth",
        "surgenet-dinov1-vitb16": "DINOv1_ViTb16_size224_SurgeNetXL.pth",
        "surgenet-dinov2-vits14": "DINOv2_ViTs14_size336_SurgeNetXL.pth",
        "surgenet-dinov2-vitb14": "DINOv2_ViTb14_size336_SurgeNetXL.pth",
        "surgenet-dinov2-vitl14": "DINOv2_ViTl14_size336_SurgeNetXL.pth",
        "surgenet-dinov3-vits16": "DINOv3_ViTs16_size336_SurgeNetXL.pth",
        "surgenet-dinov3-vitb16": "DINOv3_ViTb16_size336_SurgeNetXL.pth",
        "surgenet-dinov3-vitl16": "DINOv3_ViTl16_size336_SurgeNetXL.pth",
    }
    for name in NEW_ENTRIES:
        if name.startswith("surgenet"):
            entry = MODELS[name]
            assert entry.repo_id == "rlpddejong/SurgeNetXL_DINOv1-v3" and entry.non_commercial
            assert "LICENSE_MODELS" in entry.license_source and "MIDL 2026" in entry.citation


def test_surgenet_dinov1_loads_from_the_cache(hf_cache, monkeypatch):
    """A flat DINO state dict (what the authors' load_models.py loads into timm) at 224 px, patch 16."""
    torch.manual_seed(0)
    vit = VisionTransformer(img_size=224, patch_size=16, embed_dim=64, depth=1, num_heads=1, num_classes=0)
    vit.eval()
    name = "surgenet-dinov1-vitb16"
    hf_cache(MODELS[name].repo_id, {MODELS[name].filename: lambda p: torch.save(vit.state_dict(), p)})
    with pytest.raises(CheckpointError, match="embed_dim: found 64, expected 768"):
        load_encoder(name)
    _relax(monkeypatch, name, img_size=(224, 224), patch_size=(16, 16))
    encoder = load_encoder(name)
    assert encoder.data_config.input_size == (3, 224, 224) and encoder.data_config.resize_size == 256
    with torch.no_grad():
        torch.testing.assert_close(encoder(_images(224)), vit.forward_features(_images(224))[:, 0])


def test_surgenet_dinov2_keeps_its_registers_at_336(hf_cache, monkeypatch):
    """DINOv2 layout with 4 registers (SurgeNetDINO's configs) trained at 336 px: 24 x 24 patches of 14."""
    dims = ViTDims(dim=64, heads=1, depth=1, patch=14, grid=24)
    state = dinov2_reference.dinov2_state(dims, registers=4)
    name = "surgenet-dinov2-vitl14"
    hf_cache(MODELS[name].repo_id, {MODELS[name].filename: lambda p: torch.save(state, p)})
    with pytest.raises(CheckpointError, match="embed_dim: found 64, expected 1024"):
        load_encoder(name)
    _relax(monkeypatch, name, img_size=(336, 336), patch_size=(14, 14))
    encoder = load_encoder(name)
    assert encoder.data_config.input_size == (3, 336, 336) and encoder.data_config.resize_size == 384
    assert encoder.model.num_reg_tokens == 4
    with torch.no_grad():
        torch.testing.assert_close(
            encoder(_images(336)),
            dinov2_reference.upstream_cls(dims, state, _images(336)),
            rtol=1e-4,
            atol=1e-4,
        )


def test_surgenet_dinov3_uses_its_key_bias_and_eps(hf_cache, monkeypatch):
    """dinov3 configs of SurgeNetDINO: no storage tokens, mask_k_bias false, LayerNorm eps 1e-6, 336 px."""
    dims = Dims(storage=0, depth=1)
    state = dinov3_reference.meta_state(dims, seed=6, mask_k_bias=False)
    name = "surgenet-dinov3-vitb16"
    hf_cache(MODELS[name].repo_id, {MODELS[name].filename: lambda p: torch.save(state, p)})
    with pytest.raises(CheckpointError, match="embed_dim: found 128, expected 768"):
        load_encoder(name)
    _relax(monkeypatch, name, patch_size=(8, 8))
    encoder = load_encoder(name)
    assert encoder.model.norm.eps == 1e-6 and encoder.data_config.input_size == (3, 336, 336)
    images = _images(336)[..., :64, :64]  # RoPE takes any multiple of the patch; a small one keeps it quick
    with torch.no_grad():
        reference = dinov3_reference.upstream_cls(state, images, dims, eps=1e-6)
        torch.testing.assert_close(encoder(images), reference, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------ VideoMAE V2-L


def test_videomaev2_large_reads_the_hub_file_and_pins_vit_l(hf_cache, monkeypatch):
    entry = MODELS["videomaev2-vitl16"]
    assert entry.clip == VIDEOMAE_V2_CLIP and entry.data_config == MODELS["videomaev2-vitb16"].data_config
    assert entry.license == "CC-BY-NC-4.0" and "vit_l_hybrid_pt.sh" in entry.preprocessing_source
    tensors = {f"model.{k}": v for k, v in videomae_state().items()}
    hf_cache(entry.repo_id, {"model.safetensors": lambda p: save_file(tensors, str(p))})
    with pytest.raises(CheckpointError, match="embed_dim: found 128, expected 1024"):
        load_encoder(entry.name)
    _relax(monkeypatch, entry.name, embed_dim=128, tubelet_size=2)
    encoder = load_encoder(entry.name)
    assert encoder.clip == VIDEOMAE_V2_CLIP and encoder.provenance["repo_id"] == "OpenGVLab/VideoMAEv2-Large"
    assert encoder.model.pos_embed.shape == (1, 16 // 2 * (224 // 8) ** 2, 128)


# ------------------------------------------------------------------------------------- `plstitch models`


def test_models_lists_the_new_entries_with_their_licences(hf_cache):
    result = runner.invoke(app, ["models", "--json", "-"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    for name, license_ in NEW_ENTRIES.items():
        assert rows[name]["license"] == license_, name
        assert rows[name]["non_commercial"] == ("-NC" in license_), name
        assert rows[name]["license_source"] == MODELS[name].license_source
    assert {name for name, row in rows.items() if row["gated"]} == {
        "dinov3-vits16-facebook",
        "dinov3-vitb16-facebook",
        "dinov3-vitl16-facebook",
    }
    assert rows["mae-vitb16"]["non_commercial"] and not rows["dino-vitb16"]["non_commercial"]


def test_models_table_marks_non_commercial_and_gated(hf_cache):
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for name, license_ in NEW_ENTRIES.items():
        row = next(line for line in lines if f" {name} " in line)
        assert license_ in row and MODELS[name].source in row, row
        assert ("non-commercial" in row) == ("-NC" in license_), row
    notes = [line for line in lines if line.startswith(("Non-commercial licences", "Gated Hub repos"))]
    assert len(notes) == 2 and "videomaev2-vitl16" in notes[0] and "HF_TOKEN" in notes[1]
    assert "surgenet-dinov3-vitl16" in result.stdout.split("Non-commercial licences", 1)[1]


# ---------------------------------------------------------------------------------------------- benchmark


def test_the_2026_collection_and_the_paper_collections():
    from plstitch_eval.benchmark import COLLECTIONS, expand_models

    members = expand_models("2026")
    assert members[0] == "pl-stitch-lemon" and {"vjepa2-vitl16", "videomaev2-vitl16", "dinov3-vitb16"} <= set(
        members
    )
    assert set(members) <= set(MODELS) and len(members) == len(COLLECTIONS["2026"].models)
    assert COLLECTIONS["paper-surgical"].models == (
        "pl-stitch-lemon",
        "lemonfm",
        "endovit",
        "dino-vitb16",
        "mae-vitb16",
        "ibot-vitb16",
        "endo-fm",
        "videomaev2-vitb16",
        "t-core-vitb16",
    )
    assert COLLECTIONS["paper-cooking"].models == (
        "pl-stitch-gtea",
        "pl-stitch-breakfast",
        "dino-vitb16",
        "ibot-vitb16",
        "videomaev2-vitb16",
        "t-core-vitb16",
    )
