"""Per-model eval preprocessing: `DataConfig` plus the PIL/ndarray transform and a batched on-device path."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import InterpolationMode, v2
from torchvision.transforms.v2 import functional as tvf

from plstitch_eval.errors import ConfigError, DataError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_INTERPOLATIONS = {
    "bicubic": InterpolationMode.BICUBIC,
    "bilinear": InterpolationMode.BILINEAR,
    "nearest": InterpolationMode.NEAREST,
}


@dataclass(frozen=True)
class DataConfig:
    """Eval preprocessing: resize the shorter side to `resize_size`, centre-crop `input_size`, normalise.

    DINO eval protocol for ViT-B/16: resize 256 bicubic, crop 224, ImageNet mean/std (crop_pct = 224/256).
    """

    input_size: tuple[int, int, int] = (3, 224, 224)
    resize_size: int = 256
    crop_pct: float = 0.875
    interpolation: str = "bicubic"
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD

    def __post_init__(self) -> None:
        if self.interpolation not in _INTERPOLATIONS:
            raise ConfigError(
                f"Unknown interpolation {self.interpolation!r}; choose one of {', '.join(_INTERPOLATIONS)}."
            )
        object.__setattr__(self, "input_size", tuple(int(v) for v in self.input_size))
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))

    @classmethod
    def for_size(cls, size: int, crop_pct: float = 0.875, **kwargs: Any) -> DataConfig:
        """Config for a square input of `size`; resize side = round(size / crop_pct) (256 for 224)."""
        resize_size = round(size / crop_pct)
        return cls(input_size=(3, size, size), resize_size=resize_size, crop_pct=size / resize_size, **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DataConfig:
        """Inverse of `to_dict` (ignores unknown keys)."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)

    @classmethod
    def from_pretrained_cfg(cls, cfg: dict[str, Any]) -> DataConfig:
        """Read timm's `pretrained_cfg` (input_size, crop_pct, interpolation, mean, std)."""
        input_size = tuple(cfg.get("input_size") or (3, 224, 224))
        crop_pct = float(cfg.get("crop_pct") or 0.875)
        return cls(
            input_size=input_size,
            resize_size=round(min(input_size[1:]) / crop_pct),
            crop_pct=crop_pct,
            interpolation=cfg.get("interpolation") or "bicubic",
            mean=tuple(cfg.get("mean") or IMAGENET_MEAN),
            std=tuple(cfg.get("std") or IMAGENET_STD),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        out = asdict(self)
        for key in ("input_size", "mean", "std"):
            out[key] = list(out[key])
        return out

    def to_pretrained_cfg(self) -> dict[str, Any]:
        """The preprocessing fields of timm's `pretrained_cfg` (crop_pct = crop / resize side)."""
        return {
            "input_size": list(self.input_size),
            "interpolation": self.interpolation,
            "crop_pct": min(self.input_size[1:]) / self.resize_size,
            "crop_mode": "center",
            "mean": list(self.mean),
            "std": list(self.std),
        }

    @property
    def crop_size(self) -> tuple[int, int]:
        """(H, W) of the centre crop fed to the model."""
        return (self.input_size[1], self.input_size[2])


class EvalTransform:
    """PIL image or uint8 HWC RGB ndarray -> normalised float tensor [3,H,W] (torchvision v2 ops)."""

    def __init__(self, config: DataConfig) -> None:
        self.config = config
        self._ops = v2.Compose(
            [
                v2.ToImage(),
                v2.Resize(
                    config.resize_size, interpolation=_INTERPOLATIONS[config.interpolation], antialias=True
                ),
                v2.CenterCrop(config.crop_size),
                v2.ToDtype(torch.float32, scale=True),
                v2.Normalize(mean=list(config.mean), std=list(config.std)),
            ]
        )

    def __call__(self, image: Image.Image | np.ndarray) -> torch.Tensor:
        if isinstance(image, Image.Image):
            image = image.convert("RGB")
        elif isinstance(image, np.ndarray):
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise DataError(
                    f"Expected a uint8 HxWx3 RGB array, got dtype {image.dtype} shape {image.shape}; "
                    "convert the frame to RGB uint8 first."
                )
        else:
            raise DataError(f"Expected a PIL image or uint8 HWC ndarray, got {type(image).__name__}.")
        return self._ops(image).as_subclass(torch.Tensor)

    def __repr__(self) -> str:
        return f"EvalTransform({self.config})"


def preprocess_batch(images: torch.Tensor, config: DataConfig, device: torch.device | str) -> torch.Tensor:
    """Batched eval preprocessing on `device`: uint8 [B,H,W,3] or [B,3,H,W] -> float32 [B,3,h,w].

    Same ops as `EvalTransform` on ndarrays (resize shorter side, centre crop, scale to [0,1], normalise);
    on CPU the uint8 resize is bit-identical to it, on CUDA it resizes in float and rounds to uint8 levels.
    """
    if images.dtype != torch.uint8 or images.ndim != 4:
        raise DataError(
            f"preprocess_batch expects a uint8 [B,H,W,3] or [B,3,H,W] tensor, got {images.dtype} "
            f"{tuple(images.shape)}."
        )
    if images.shape[1] != 3 and images.shape[-1] == 3:
        images = images.permute(0, 3, 1, 2)
    elif images.shape[1] != 3:
        raise DataError(f"preprocess_batch expects 3 colour channels, got shape {tuple(images.shape)}.")
    device = torch.device(device)
    non_blocking = device.type == "cuda"
    images = images.contiguous().to(device, non_blocking=non_blocking)
    mode = _INTERPOLATIONS[config.interpolation]
    if device.type == "cpu":
        resized = tvf.resize(images, [config.resize_size], interpolation=mode, antialias=True).float()
    else:
        resized = tvf.resize(images.float(), [config.resize_size], interpolation=mode, antialias=True)
        resized = resized.round_().clamp_(0, 255)
    cropped = tvf.center_crop(resized, list(config.crop_size)) / 255.0
    mean = torch.tensor(config.mean, device=device).view(1, 3, 1, 1)
    std = torch.tensor(config.std, device=device).view(1, 3, 1, 1)
    return (cropped - mean) / std
