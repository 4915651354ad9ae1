"""Tiny inputs for the figure commands: feature stores, timm ViT folders, a run with a temporal head."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from plstitch_eval.store.features import FeatureStore, VideoFeatures

CLASS_NAMES = ["Prep", "Cut", "Close"]
STORE_VIDEOS = {"video01": 30, "video02": 24, "video41": 27, "video42": 21}


def tiny_vit(seed: int) -> torch.nn.Module:
    """A 2-block ViT on 32 px images (patch 8, dim 32, 4 heads) with seeded random weights."""
    torch.manual_seed(seed)
    return timm.create_model(
        "vit_tiny_patch16_224",
        pretrained=False,
        img_size=32,
        patch_size=8,
        embed_dim=32,
        depth=2,
        num_heads=4,
        num_classes=0,
    ).eval()


def save_vit(folder: Path, seed: int) -> Path:
    from plstitch_eval.hub import DataConfig, save_timm_dir

    save_timm_dir(tiny_vit(seed), folder, DataConfig.for_size(32))
    return folder


def check_png(path: Path, width_in: float, height_in: float, dpi: int = 150) -> np.ndarray:
    """The PNG exists, has figure-size x dpi pixels and is not blank; returns its pixels."""
    with Image.open(path) as im:
        assert im.size == (round(width_in * dpi), round(height_in * dpi))
        pixels = np.asarray(im.convert("RGB"), dtype=np.float64)
    assert pixels.std() > 5.0, "figure looks blank"
    return pixels


@pytest.fixture(scope="session")
def store_dir(tmp_path_factory) -> Path:
    """Four videos, three phases in order, features = class centre + noise (D = 8), 1 fps."""
    root = tmp_path_factory.mktemp("store")
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 8)) * 3
    manifest = {
        "dataset": "toy",
        "class_names": CLASS_NAMES,
        "splits": {"train": ["video01", "video02"], "test": ["video41", "video42"]},
        "model": {"spec": "toy", "provenance": {}},
        "fps": 1.0,
    }
    store = FeatureStore.create(root, manifest)
    for video, n in STORE_VIDEOS.items():
        labels = np.repeat(np.arange(3), [n // 3, n // 3, n - 2 * (n // 3)]).astype(np.int64)
        feats = (centres[labels] + rng.normal(size=(n, 8))).astype(np.float32)
        store.write(VideoFeatures(video, feats, labels, np.arange(n, dtype=np.float64)))
    return root


@pytest.fixture(scope="session")
def vit_dirs(tmp_path_factory) -> tuple[Path, Path]:
    """Two timm-format tiny ViT folders with different weights."""
    root = tmp_path_factory.mktemp("vits")
    return save_vit(root / "fwd", 1), save_vit(root / "bwd", 2)


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """A training-run-like folder: backbone/ (tiny ViT) with a tiny temporal head beside it."""
    from plstitch_eval.hub.ranking_head import TemporalHead, save_temporal_head

    root = tmp_path_factory.mktemp("run")
    save_vit(root / "backbone", 3)
    torch.manual_seed(4)
    save_temporal_head(TemporalHead(32, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32), root / "backbone")
    return root


@pytest.fixture(scope="session")
def video_root(tmp_path_factory) -> Path:
    """Three short synthetic videos in the Cholec80 layout (read with --dataset cholec80 --split all)."""
    from plstitch_eval.data.synthetic import generate_synthetic

    return generate_synthetic(
        tmp_path_factory.mktemp("videos") / "synth",
        n_videos=3,
        size=32,
        seed=0,
        min_seconds=8,
        max_seconds=10,
    )


@pytest.fixture()
def frames(tmp_path) -> list[Path]:
    """Two small RGB images with structure (gradients and a bright square)."""
    paths = []
    for i in range(2):
        yy, xx = np.mgrid[0:48, 0:40]
        img = np.stack([xx * 6, yy * 5, np.full_like(xx, 80 + 60 * i)], axis=-1)
        img[10 + 5 * i : 22 + 5 * i, 8:20] = 255
        path = tmp_path / f"frame{i}.png"
        Image.fromarray(img.astype(np.uint8)).save(path)
        paths.append(path)
    return paths
