"""Training augmentations (torchvision v2 on uint8 [3, H, W] tensors), one draw per frame and view.

Every frame of an item (each clip frame, each iBOT crop, the jigsaw current frame and its two neighbours) is
augmented under its own seed, derived from the item's seed alone: frames of a clip never share a colour draw
(shared colour drift would let the ranking heads order frames by augmentation), yet an item is reproducible
from its `SampleSpec.seed` whatever the worker, rank or resume point. Settings follow the authors' loader:

- clip frame: square resize, colour jitter (0.4, 0.4, 0.2, 0.1) p=0.8, grayscale p=0.2, blur p=0.1, no flip;
- iBOT global crops: RandomResizedCrop (scale 0.14-1, bicubic), flip, jitter p=0.8, grayscale p=0.2,
  blur 1.0 / 0.1, solarize 0 / 0.2;
- jigsaw current frame: its own RandomResizedCrop (scale 0.14-1, bicubic), jitter p=0.3, grayscale p=0.2;
- iBOT local crops (`local_crops` > 0; the authors' default is none): RandomResizedCrop to the local size
  (scale 0.05-0.4, bicubic), flip, jitter p=0.8, grayscale p=0.2, blur p=0.5 (DINO's local view);
- jigsaw neighbours (past, future): square resize only (the issue and REFERENCE section 1); the authors'
  released loader also recolours them (jitter p=0.3, grayscale p=0.2): `neighbour_colour=True`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torchvision.transforms import InterpolationMode, v2

from plstitch_eval.errors import ConfigError
from plstitch_eval.preprocess import IMAGENET_MEAN, IMAGENET_STD

Transform = Callable[[Tensor], Tensor]

# stream ids mixed into an item's seed, one per part of the item, so parts never share a draw
_CLIP, _CROPS, _CONTEXT, _LOCAL = 1, 2, 3, 4


def _blur(img_size: int, p: float) -> v2.Transform:
    """Gaussian blur with DINO's sigma range (0.1-2.0 at 224 px) scaled to `img_size`."""
    scale = img_size / 224
    kernel = max(3, int(img_size * 0.1) | 1)
    return v2.RandomApply([v2.GaussianBlur(kernel, sigma=(0.1 * scale, 2.0 * scale))], p=p)


def _colour(p_jitter: float, p_gray: float = 0.2) -> list[v2.Transform]:
    """DINO's colour jitter (0.4, 0.4, 0.2, 0.1) with probability `p_jitter`, then grayscale."""
    return [
        v2.RandomApply([v2.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=p_jitter),
        v2.RandomGrayscale(p=p_gray),
    ]


def _normalise() -> list[v2.Transform]:
    """uint8 -> float in [0, 1] -> ImageNet mean/std."""
    return [v2.ToDtype(torch.float32, scale=True), v2.Normalize(list(IMAGENET_MEAN), list(IMAGENET_STD))]


def _resized_crop(img_size: int, scale: tuple[float, float]) -> v2.RandomResizedCrop:
    return v2.RandomResizedCrop(
        img_size, scale=scale, interpolation=InterpolationMode.BICUBIC, antialias=True
    )


def clip_frame_transform(img_size: int) -> v2.Compose:
    """One clip frame: square resize, jitter p=0.8, grayscale p=0.2, blur p=0.1 (authors' clip pipeline).

    Applied to each frame under its own seed (`ItemAugmentation.clip`); no flip, so a clip keeps its layout.
    """
    return v2.Compose(
        [v2.Resize((img_size, img_size), antialias=True), *_colour(0.8), _blur(img_size, 0.1), *_normalise()]
    )


def global_crop_transforms(
    img_size: int, scale: tuple[float, float] = (0.14, 1.0)
) -> tuple[v2.Compose, v2.Compose]:
    """DINO/iBOT global crops: resized crop, flip, jitter p=0.8, grayscale; blur 1.0/0.1, solarize 0/0.2."""
    first = v2.Compose(
        [
            _resized_crop(img_size, scale),
            v2.RandomHorizontalFlip(),
            *_colour(0.8),
            _blur(img_size, 1.0),
            *_normalise(),
        ]
    )
    second = v2.Compose(
        [
            _resized_crop(img_size, scale),
            v2.RandomHorizontalFlip(),
            *_colour(0.8),
            _blur(img_size, 0.1),
            v2.RandomSolarize(128, p=0.2),
            *_normalise(),
        ]
    )
    return first, second


def local_crop_transform(size: int, scale: tuple[float, float] = (0.05, 0.4)) -> v2.Compose:
    """DINO/iBOT local view: small resized crop, flip, jitter p=0.8, grayscale p=0.2, blur p=0.5."""
    flip = v2.RandomHorizontalFlip()
    return v2.Compose([_resized_crop(size, scale), flip, *_colour(0.8), _blur(size, 0.5), *_normalise()])


def jigsaw_current_transform(img_size: int, scale: tuple[float, float] = (0.14, 1.0)) -> v2.Compose:
    """Jigsaw current frame: its own resized crop (bicubic), jitter p=0.3, grayscale p=0.2, no blur/flip."""
    return v2.Compose([_resized_crop(img_size, scale), *_colour(0.3), *_normalise()])


def jigsaw_neighbour_transform(img_size: int, colour: bool = False) -> v2.Compose:
    """Jigsaw past/future frame: square resize; with `colour`, jitter p=0.3 and grayscale p=0.2 (authors')."""
    return v2.Compose(
        [v2.Resize((img_size, img_size), antialias=True), *(_colour(0.3) if colour else []), *_normalise()]
    )


def part_seeds(seed: int, part: int, count: int) -> list[int]:
    """`count` independent 64-bit seeds for `part` of the item seeded `seed` (SeedSequence mixing)."""
    state = np.random.SeedSequence([int(seed) % 2**64, part]).generate_state(count, dtype=np.uint64)
    return [int(s) for s in state]


def apply_seeded(transforms: Sequence[Transform], images: Tensor, seeds: Sequence[int]) -> Tensor:
    """transforms[i](images[i]) with the CPU RNG seeded by seeds[i]; the caller's RNG state is restored.

    Why: v2 transforms draw from torch's global CPU generator; seeding it per frame gives every frame its own
    draw while keeping the result a function of the seeds alone. CUDA generators are never touched.
    """
    out = []
    generator = torch.default_generator
    saved = generator.get_state()
    try:
        for transform, image, seed in zip(transforms, images, seeds, strict=True):
            generator.manual_seed(seed)
            out.append(transform(image))
    finally:
        generator.set_state(saved)
    return torch.stack(out)


@dataclass(frozen=True)
class AugmentationSettings:
    """What the training items are augmented with; `build()` makes the `ItemAugmentation`."""

    img_size: int = 224
    crop_scale: tuple[float, float] = (0.14, 1.0)  # iBOT global crops and the jigsaw current frame
    neighbour_colour: bool = False  # True = authors' loader: jitter p=0.3 + grayscale p=0.2 on past/future
    local_crops: int = 0  # iBOT local views of the current frame (0: none, as PL-Stitch)
    local_crop_size: int = 32
    local_crop_scale: tuple[float, float] = (0.05, 0.4)

    def __post_init__(self) -> None:
        if self.local_crops < 0 or self.local_crop_size < 1:
            raise ConfigError(
                f"local_crops must be >= 0 and local_crop_size >= 1 (got {self.local_crops}, "
                f"{self.local_crop_size})."
            )
        low, high = self.crop_scale
        if self.img_size < 1:
            raise ConfigError(f"img_size must be >= 1 (got {self.img_size}).")
        if not 0 < low <= high <= 1:
            raise ConfigError(f"crop_scale must be 0 < MIN <= MAX <= 1 (got {low}, {high}).")

    def build(self) -> ItemAugmentation:
        """The transforms for these settings."""
        return ItemAugmentation(self)


class ItemAugmentation:
    """Augments the parts of one training item, each frame under its own seed derived from the item seed."""

    def __init__(self, settings: AugmentationSettings) -> None:
        size = settings.img_size
        self.settings = settings
        self.clip_frame = clip_frame_transform(size)
        self.crop_views = global_crop_transforms(size, settings.crop_scale)
        self.current = jigsaw_current_transform(size, settings.crop_scale)
        self.neighbour = jigsaw_neighbour_transform(size, settings.neighbour_colour)
        self.local_view = local_crop_transform(settings.local_crop_size, settings.local_crop_scale)

    def clip(self, frames: Tensor, seed: int) -> Tensor:
        """uint8 [k,3,H,W] -> float [k,3,S,S]: every frame its own draw (no shared colour drift)."""
        k = len(frames)
        return apply_seeded([self.clip_frame] * k, frames, part_seeds(seed, _CLIP, k))

    def crops(self, frame: Tensor, seed: int) -> Tensor:
        """uint8 [3,H,W] current frame -> float [2,3,S,S] iBOT global views."""
        return apply_seeded(self.crop_views, frame.expand(2, *frame.shape), part_seeds(seed, _CROPS, 2))

    def local_crops(self, frame: Tensor, seed: int) -> Tensor:
        """uint8 [3,H,W] current frame -> float [L,3,s,s] iBOT local views (L = `local_crops`)."""
        n = self.settings.local_crops
        return apply_seeded([self.local_view] * n, frame.expand(n, *frame.shape), part_seeds(seed, _LOCAL, n))

    def context(self, triplet: Tensor, seed: int) -> Tensor:
        """uint8 [3,3,H,W] (past, current, future) -> float [3,3,S,S]: neighbour, current, neighbour."""
        transforms = (self.neighbour, self.current, self.neighbour)
        return apply_seeded(transforms, triplet, part_seeds(seed, _CONTEXT, 3))
