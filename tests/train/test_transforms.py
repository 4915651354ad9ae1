"""Training transforms: per-frame seeds, the jigsaw current/neighbour pipelines, settings validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plstitch_eval.errors import ConfigError
from plstitch_train.transforms import (
    AugmentationSettings,
    apply_seeded,
    clip_frame_transform,
    jigsaw_current_transform,
    jigsaw_neighbour_transform,
    part_seeds,
)

SIZE = 32
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def _frame(seed: int = 0, height: int = 40, width: int = 56) -> torch.Tensor:
    """A textured uint8 [3, H, W] frame."""
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (3, height, width), dtype=np.uint8))


def plain_resize(frame: torch.Tensor, size: int = SIZE) -> torch.Tensor:
    """Independent reference: antialiased bilinear square resize to uint8 levels, then ImageNet mean/std."""
    resized = F.interpolate(frame[None].float(), size=(size, size), mode="bilinear", antialias=True)[0]
    return (resized.round().clamp(0, 255) / 255 - MEAN) / STD


def _is_plain_resize(image: torch.Tensor, frame: torch.Tensor) -> bool:
    return torch.allclose(image, plain_resize(frame), atol=1.1 / 255 / 0.224)


def test_part_seeds_are_deterministic_and_distinct() -> None:
    assert part_seeds(7, 1, 4) == part_seeds(7, 1, 4)
    seeds = part_seeds(7, 1, 4) + part_seeds(7, 2, 4) + part_seeds(8, 1, 4)
    assert len(set(seeds)) == 12


def test_apply_seeded_equals_a_manually_seeded_call_and_restores_the_rng() -> None:
    transform = clip_frame_transform(SIZE)
    frames = torch.stack([_frame(0), _frame(1)])
    torch.manual_seed(123)
    before = torch.get_rng_state()
    out = apply_seeded([transform, transform], frames, [11, 12])
    assert torch.equal(torch.get_rng_state(), before)
    for i, seed in enumerate((11, 12)):
        torch.manual_seed(seed)
        assert torch.equal(out[i], transform(frames[i]))


def test_neighbour_without_colour_is_a_plain_resize() -> None:
    transform = jigsaw_neighbour_transform(SIZE)
    frame = _frame(3)
    for seed in range(5):
        torch.manual_seed(seed)
        assert _is_plain_resize(transform(frame), frame)


def test_neighbour_is_resized_and_recoloured_with_the_authors_probabilities() -> None:
    """Authors' code: no crop, jitter p=0.3, grayscale p=0.2 -> untouched in 0.7 * 0.8 = 56% of draws."""
    transform = jigsaw_neighbour_transform(SIZE, colour=True)
    frame = _frame(4)
    untouched = 0
    for seed in range(300):
        torch.manual_seed(seed)
        out = transform(frame)
        assert out.shape == (3, SIZE, SIZE)
        untouched += _is_plain_resize(out, frame)
    assert 0.45 < untouched / 300 < 0.67


def test_current_frame_gets_its_own_crop() -> None:
    transform = jigsaw_current_transform(SIZE)
    frame = _frame(5)
    outs = []
    for seed in range(20):
        torch.manual_seed(seed)
        out = transform(frame)
        assert out.shape == (3, SIZE, SIZE) and not _is_plain_resize(out, frame)
        outs.append(out)
    assert not torch.equal(outs[0], outs[1])


@pytest.mark.parametrize(
    "changes",
    [{"img_size": 0}, {"crop_scale": (0.0, 1.0)}, {"crop_scale": (0.5, 0.2)}, {"crop_scale": (0.1, 1.5)}],
)
def test_settings_are_validated_once(changes: dict) -> None:
    with pytest.raises(ConfigError):
        AugmentationSettings(**changes)
