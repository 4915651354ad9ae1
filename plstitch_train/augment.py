"""Training augmentations (torchvision v2 on uint8 tensors): clip augmentation and iBOT/DINO global crops.

A clip is one [k, 3, H, W] tensor, so v2 draws one set of parameters and applies it to every frame - the
frames of a clip differ only in content, never in augmentation (no flip).
"""

from __future__ import annotations

import torch
from torchvision.transforms import InterpolationMode, v2

from plstitch_eval.hub.data_config import IMAGENET_MEAN, IMAGENET_STD


def _blur(img_size: int, p: float) -> v2.Transform:
    """Gaussian blur with DINO's sigma range (0.1-2.0 at 224 px) scaled to `img_size`."""
    scale = img_size / 224
    kernel = max(3, int(img_size * 0.1) | 1)
    return v2.RandomApply([v2.GaussianBlur(kernel, sigma=(0.1 * scale, 2.0 * scale))], p=p)


def _colour(p_jitter: float = 0.8, p_gray: float = 0.2) -> list[v2.Transform]:
    return [
        v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=p_jitter),
        v2.RandomGrayscale(p=p_gray),
    ]


def _normalise() -> list[v2.Transform]:
    return [v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(IMAGENET_MEAN), list(IMAGENET_STD))]


def clip_transform(img_size: int) -> v2.Compose:
    """Authors' clip augmentation: square resize, jitter (0.4,0.4,0.2,0.1) p=0.8, grayscale 0.2, blur 0.1."""
    return v2.Compose(
        [v2.Resize((img_size, img_size), antialias=True), *_colour(), _blur(img_size, 0.1), *_normalise()]
    )


def global_crop_transforms(
    img_size: int, scale: tuple[float, float] = (0.14, 1.0)
) -> tuple[v2.Compose, v2.Compose]:
    """DINO/iBOT global crops: resized crop (scale 0.14-1), flip, colour; blur 1.0/0.1, solarize 0/0.2."""
    crop = v2.RandomResizedCrop(
        img_size, scale=scale, interpolation=InterpolationMode.BICUBIC, antialias=True
    )
    first = v2.Compose([crop, v2.RandomHorizontalFlip(), *_colour(), _blur(img_size, 1.0), *_normalise()])
    second = v2.Compose(
        [
            crop,
            v2.RandomHorizontalFlip(),
            *_colour(),
            _blur(img_size, 0.1),
            v2.RandomSolarize(128, p=0.2),
            *_normalise(),
        ]
    )
    return first, second
