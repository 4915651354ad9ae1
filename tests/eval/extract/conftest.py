"""Fixtures for extraction tests: a tiny Cholec80-layout dataset of real MP4s and a tiny timm ViT folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import timm

from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES
from plstitch_eval.hub import DataConfig, save_timm_dir
from tests.media import write_video

NATIVE_FPS = 25
VIDEO_SECONDS = (3, 2, 4)  # three short videos, different lengths
FRAME_H, FRAME_W = 40, 56


def ramp_frames(seed: int, height: int = FRAME_H, width: int = FRAME_W) -> Callable[[int], np.ndarray]:
    """Frame i of `write_mp4`'s default video: a random picture brightened by 7 i, left i columns halved."""
    base = np.random.default_rng(seed).integers(0, 255, size=(height, width, 3), dtype=np.uint8)

    def image_at(i: int) -> np.ndarray:
        image = (base.astype(np.int32) + 7 * i).clip(0, 255).astype(np.uint8)
        image[:, : (i % width)] //= 2
        return image

    return image_at


def write_mp4(
    path: Path,
    n_frames: int,
    seed: int,
    fps: int = NATIVE_FPS,
    image_at: Callable[[int], np.ndarray] | None = None,
) -> None:
    """A real H.264 MP4 whose frames differ (colour ramps + noise shaped by the frame index), or whose frame
    i is `image_at(i)` (uint8 HxWx3, even sides)."""
    write_video(path, image_at or ramp_frames(seed), n_frames, fps=fps)  # x264 crf 18, ultrafast


def write_phase_tsv(path: Path, n_frames: int) -> None:
    """Cholec80 annotation: header, then one phase per frame at 25 fps, walking through the phases."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = ["Frame\tPhase"]
    for i in range(n_frames):
        rows.append(f"{i}\t{CHOLEC80_PHASES[min(i // NATIVE_FPS, len(CHOLEC80_PHASES) - 1)]}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")


def make_cholec80(root: Path, seconds: tuple[int, ...] = VIDEO_SECONDS, start: int = 1) -> Path:
    """Cholec80 layout: videos/videoNN.mp4 + phase_annotations/videoNN-phase.txt."""
    for offset, secs in enumerate(seconds):
        name = f"video{start + offset:02d}"
        n = secs * NATIVE_FPS
        write_mp4(root / "videos" / f"{name}.mp4", n, seed=offset)
        write_phase_tsv(root / "phase_annotations" / f"{name}-phase.txt", n)
    return root


@pytest.fixture(scope="session")
def cholec_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A three-video Cholec80-layout dataset (read-only for tests; copy it to modify)."""
    return make_cholec80(tmp_path_factory.mktemp("cholec80"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-block ViT (32 px, patch 8, dim 32) in timm's folder format, loadable by `load_encoder`."""
    model = timm.create_model(
        "vit_small_patch16_224",
        pretrained=False,
        img_size=32,
        patch_size=8,
        embed_dim=32,
        depth=2,
        num_heads=2,
        num_classes=0,
    )
    return save_timm_dir(model, tmp_path_factory.mktemp("tiny_vit"), DataConfig.for_size(32))
