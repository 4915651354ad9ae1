"""Fixtures for the hub tests: tiny ViT/ConvNeXt weights and fake Hugging Face caches in temp dirs."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import huggingface_hub
import pytest
import torch
from timm.models.vision_transformer import VisionTransformer
from torchvision.models.convnext import CNBlockConfig, ConvNeXt

TINY_VIT = {"img_size": 32, "patch_size": 8, "embed_dim": 64, "depth": 2, "num_heads": 1}


def make_tiny_vit(**overrides) -> VisionTransformer:
    """A random tiny timm ViT (64-d, so the inferred heads = 64 // 64 = 1 match)."""
    torch.manual_seed(1)
    model = VisionTransformer(**{**TINY_VIT, **overrides}, num_classes=0).eval()
    with torch.no_grad():  # non-trivial norms and biases so a wrong mapping shows
        for name, param in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                param.add_(0.1 * torch.randn_like(param))
    return model


def make_tiny_tv_convnext() -> ConvNeXt:
    """A random tiny torchvision ConvNeXt: 4 stages (timm's ConvNeXt has 4) of widths 8-32, depths 1/2/1/1."""
    torch.manual_seed(2)
    model = ConvNeXt(
        [
            CNBlockConfig(8, 16, 1),
            CNBlockConfig(16, 24, 2),
            CNBlockConfig(24, 32, 1),
            CNBlockConfig(32, None, 1),
        ],
        layer_scale=0.5,
        num_classes=10,
    )
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "layer_scale" in name or name.endswith("bias"):
                param.add_(0.1 * torch.randn_like(param))
    return model.eval()


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Callable[..., tuple[Path, str]]:
    """Make `add(repo_id, {filename: writer(path)})` build `models--ORG--NAME` entries in an offline cache.

    Returns (snapshot dir, commit). The cache is also installed as the default HF_HUB_CACHE, offline on.
    """
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    counter = iter(range(1, 1000))

    def add(
        repo_id: str, files: dict[str, Callable[[Path], None]], revision: str = "main"
    ) -> tuple[Path, str]:
        commit = hashlib.sha1(f"{repo_id}-{next(counter)}".encode()).hexdigest()
        repo_dir = cache / f"models--{repo_id.replace('/', '--')}"
        (repo_dir / "refs").mkdir(parents=True, exist_ok=True)
        (repo_dir / "refs" / revision).write_text(commit)  # no trailing newline
        snapshot = repo_dir / "snapshots" / commit
        for name, writer in files.items():
            target = snapshot / name
            target.parent.mkdir(parents=True, exist_ok=True)
            writer(target)
        return snapshot, commit

    add.cache_dir = cache  # type: ignore[attr-defined]
    return add


@pytest.fixture
def temp_entry():
    """`add(entry)` registers a model for one test and removes it afterwards."""
    from plstitch_eval.hub.registry import MODELS, register

    added = []

    def add(entry):
        added.append(entry.name)
        return register(entry)

    yield add
    for name in added:
        MODELS.pop(name, None)
