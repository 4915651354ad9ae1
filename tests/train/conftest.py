"""Fixtures for the training tests: tiny real MP4s (PyAV) and a tiny training config."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from plstitch_train.presets import TrainConfig, get_preset
from tests.media import write_video

FRAME_H, FRAME_W = 40, 48
VIDEO_FPS = 4
VIDEO_FRAMES = (24, 32)


def write_mp4(path: Path, n_frames: int, seed: int, fps: int = VIDEO_FPS) -> None:
    """A real H.264 MP4 whose content moves steadily with time (a bar sweeps right, brightness rises)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 160, size=(FRAME_H, FRAME_W, 3), dtype=np.uint8)

    def image_at(i: int) -> np.ndarray:
        image = (base.astype(np.int32) + 3 * i).clip(0, 255).astype(np.uint8)
        x = int(i * FRAME_W / n_frames)
        image[:, x : x + 6] = (255, 40, 40)
        return image

    write_video(path, image_at, n_frames, fps=fps, options={"crf": "10", "preset": "ultrafast"})


@pytest.fixture(scope="session", autouse=True)
def _one_thread() -> Iterator[None]:
    """One intra-op thread: on a loaded 2-core machine more threads only add contention."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def video_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two short MP4s in a folder (the `--data DIR` layout)."""
    root = tmp_path_factory.mktemp("videos")
    for i, n in enumerate(VIDEO_FRAMES):
        write_mp4(root / f"clip{i}.mp4", n, seed=i)
    return root


@pytest.fixture(scope="session")
def frame_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One decoded-frame cache shared by the tests (decoding happens once)."""
    return tmp_path_factory.mktemp("frame_cache")


def tiny_config(video_dir: Path, cache: Path, **changes: object) -> TrainConfig:
    """The tiny-cpu preset shrunk further: 32 px frames, a 2-block ViT, 4-frame clips, 4 items per video."""
    config = get_preset("tiny-cpu").replace(
        data=str(video_dir),
        cache_dir=str(cache),
        fps=float(VIDEO_FPS),
        frame_size=36,
        clip_len=4,
        max_step=3,
        clips_per_video=(4, 4, 4),
        context_seconds=(0.5, 1.0),
        model_args={"patch_size": 8, "embed_dim": 32, "depth": 2, "num_heads": 2},
        img_size=32,
        ibot_out_dim=64,
        ibot_hidden_dim=64,
        ibot_bottleneck_dim=32,
        temporal_dim=32,
        temporal_layers=1,
        temporal_heads=2,
        temporal_ff=64,
        jigsaw_heads=2,
        jigsaw_start_epoch=0.0,
        jigsaw_ramp_epochs=0.0,
        batch_size=4,
        epochs=2,
        warmup_epochs=0.0,
        checkpoint_every=1000,
        log_every=1,
        num_workers=0,
    )
    return config.replace(**changes)


# Biases whose exact gradient is 0 (a ranking loss ignores a common shift of all scores; attention ignores a
# shift of a query's logits, so the key part of qkv.bias too): their gradients are rounding noise, which Adam
# turns into steps of up to lr, so they differ between equivalent batch splits.
SHIFT_INVARIANT = ("temporal_head.scorer.2.bias", "jigsaw_head.scorer.3.bias")


def assert_states_close(expected: dict[str, torch.Tensor], got: dict[str, torch.Tensor]) -> None:
    """Every tensor of two model states agrees to float tolerance (except the shift-invariant biases)."""
    assert expected.keys() == got.keys()
    for key, value in expected.items():
        if key.endswith(SHIFT_INVARIANT):
            continue
        value, other = value, got[key]
        if key.endswith("attn.qkv.bias"):  # the key bias: softmax ignores a shift of all logits of a query
            dim = value.shape[0] // 3
            keep = torch.ones_like(value, dtype=torch.bool)
            keep[dim : 2 * dim] = False
            value, other = value[keep], other[keep]
        torch.testing.assert_close(other, value, rtol=1e-4, atol=5e-5, msg=lambda m, k=key: f"{k}: {m}")
