"""One preprocessing for every path: the encoder's transform and batch path, extraction and the figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import timm
import torch
from PIL import Image

from plstitch_eval.analysis.frames import model_inputs
from plstitch_eval.data.video import read_frames
from plstitch_eval.errors import ConfigError, DataError, DecodeError
from plstitch_eval.extract import VideoJob, iter_video_chunks
from plstitch_eval.hub import DataConfig, Encoder
from plstitch_eval.preprocess import (
    EvalTransform,
    frame_plan,
    normalize_crops,
    prepare_frame,
    preprocess_batch,
)


def _encoder(config: DataConfig) -> Encoder:
    model = timm.create_model(
        "vit_small_patch16_224",
        pretrained=False,
        img_size=config.input_size[1],
        patch_size=8,
        embed_dim=32,
        depth=1,
        num_heads=2,
        num_classes=0,
    )
    return Encoder(model, config, {"spec": "tiny-test"})


@pytest.mark.parametrize("interpolation", ["bicubic", "bilinear", "nearest"])
@pytest.mark.parametrize("shape", [(45, 70), (70, 45), (37, 37)])
def test_encoder_extraction_and_analysis_give_the_same_tensor(tmp_path: Path, interpolation, shape) -> None:
    config = DataConfig.for_size(32, interpolation=interpolation)
    encoder = _encoder(config)
    image = np.random.default_rng(0).integers(0, 256, size=(*shape, 3), dtype=np.uint8)

    # extraction: a one-frame folder decoded by a worker (uint8 crop), normalised as the encode loop does
    folder = tmp_path / "frames"
    folder.mkdir()
    Image.fromarray(image).save(folder / "0001.png")
    assert np.array_equal(next(read_frames(folder)).image, image)  # PNG is lossless
    plan = frame_plan(config, fps=None)
    chunk = next(iter_video_chunks(VideoJob(0, folder), plan, batch_size=4))
    assert chunk.error is None and chunk.images.shape == (1, 3, 32, 32)
    extracted = normalize_crops(chunk.images, plan)[0]

    per_image = encoder.transform(image)
    batched = encoder.preprocess_batch(torch.from_numpy(image)[None])[0]  # CPU: exact
    figures = model_inputs(encoder, [image], "cpu")[0]
    from_pil = encoder.transform(Image.fromarray(image))
    assert per_image.dtype == torch.float32 and per_image.shape == (3, 32, 32)
    for other in (extracted, batched, figures, from_pil):
        assert torch.equal(other, per_image)


def test_normalisation_is_textbook() -> None:
    config = DataConfig.for_size(32)
    out = EvalTransform(config)(np.full((37, 50, 3), 200, dtype=np.uint8))
    expected = (200 / 255 - torch.tensor(config.mean)) / torch.tensor(config.std)
    torch.testing.assert_close(out[:, 16, 16], expected, rtol=0, atol=1e-6)


def test_batch_of_frames_equals_each_frame() -> None:
    config = DataConfig.for_size(32)
    frames = np.random.default_rng(1).integers(0, 256, size=(3, 45, 60, 3), dtype=np.uint8)
    singles = torch.stack([EvalTransform(config)(f) for f in frames])
    assert torch.equal(preprocess_batch(torch.from_numpy(frames), config, "cpu"), singles)


def test_bad_inputs_are_clear_errors() -> None:
    config = DataConfig.for_size(32)
    plan = frame_plan(config)
    with pytest.raises(DataError, match="uint8 HxWx3"):
        prepare_frame(np.zeros((10, 10), dtype=np.uint8), plan)
    with pytest.raises(DataError, match="PIL image or uint8"):
        prepare_frame([[0]], plan)
    with pytest.raises(DataError, match="uint8 \\[B,H,W,3\\]"):
        preprocess_batch(torch.zeros(2, 3, 8, 8), config, "cpu")
    with pytest.raises(DecodeError, match="smaller than the model's"):
        prepare_frame(np.zeros((20, 20, 3), dtype=np.uint8), frame_plan(config, resize_on_decode=True))
    with pytest.raises(ConfigError, match="Unknown interpolation"):
        DataConfig(interpolation="lanczos-ish")
