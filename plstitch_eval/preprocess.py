"""Eval preprocessing: a model's `DataConfig` (like timm's pretrained cfg) and the ops built from it -
resize the shorter side and centre crop (`crop_mode="center"`, the DINO evaluation transform) or resize
the whole frame to the input size ignoring its aspect (`"squash"`, how PL-Stitch's and EndoViT's authors
feed frames), then normalise.

The one home of these ops, so that the encoder's per-image `EvalTransform`, its batched `preprocess_batch`,
extraction (`prepare_frame` in decoding workers, `normalize_crops` on the device) and the analysis figures
all give the model the same tensor. Sits below `plstitch_eval.hub`, which imports it (never the reverse).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from PIL import Image
from torchvision.transforms import InterpolationMode
from torchvision.transforms.v2 import functional as tvf

from plstitch_eval.data.margin import MarginBox, crop_margin
from plstitch_eval.data.video import ClipSampling
from plstitch_eval.errors import ConfigError, DataError, DecodeError

INTERPOLATIONS = {
    "bicubic": InterpolationMode.BICUBIC,
    "bilinear": InterpolationMode.BILINEAR,
    "nearest": InterpolationMode.NEAREST,
}


CROP_MODES = ("center", "squash")  # timm's pretrained_cfg names for the two transforms
TRANSFORMS = {  # `--transform` names -> crop mode
    "center-crop": "center",  # resize shorter side, centre crop (DINO / iBOT / MAE / DINOv2 evaluation)
    "whole-frame": "squash",  # whole frame resized to the input size (PL-Stitch, EndoViT authors)
}

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True)
class DataConfig:
    """Eval preprocessing: resize the shorter side to `resize_size`, centre-crop `input_size`, normalise.

    DINO eval protocol for ViT-B/16: resize 256 bicubic, crop 224, ImageNet mean/std (crop_pct = 224/256).
    `crop_mode="squash"`: the whole frame is resized to `input_size` (aspect not kept, nothing cropped);
    `resize_size` and `crop_pct` are then the input side and 1.0.
    """

    input_size: tuple[int, int, int] = (3, 224, 224)
    resize_size: int = 256
    crop_pct: float = 0.875
    interpolation: str = "bicubic"
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    crop_mode: str = "center"

    def __post_init__(self) -> None:
        if self.interpolation not in INTERPOLATIONS:
            raise ConfigError(
                f"Unknown interpolation {self.interpolation!r}; choose one of {', '.join(INTERPOLATIONS)}."
            )
        if self.crop_mode not in CROP_MODES:
            raise ConfigError(f"Unknown crop_mode {self.crop_mode!r}; choose one of {', '.join(CROP_MODES)}.")
        object.__setattr__(self, "input_size", tuple(int(v) for v in self.input_size))
        object.__setattr__(self, "mean", tuple(float(v) for v in self.mean))
        object.__setattr__(self, "std", tuple(float(v) for v in self.std))

    @classmethod
    def for_size(cls, size: int, crop_pct: float = 0.875, **kwargs: Any) -> DataConfig:
        """Config for a square input of `size`; resize side = round(size / crop_pct) (256 for 224)."""
        resize_size = round(size / crop_pct)
        return cls(input_size=(3, size, size), resize_size=resize_size, crop_pct=size / resize_size, **kwargs)

    @classmethod
    def whole_frame(cls, size: int = 224, **kwargs: Any) -> DataConfig:
        """The whole frame resized to `size` x `size` (crop_mode "squash"), e.g. PL-Stitch's 224x224."""
        return cls(input_size=(3, size, size), resize_size=size, crop_pct=1.0, crop_mode="squash", **kwargs)

    def with_transform(self, transform: str) -> DataConfig:
        """This config under a `--transform` name (`center-crop` or `whole-frame`), sizes kept consistent."""
        if transform not in TRANSFORMS:
            raise ConfigError(f"Unknown --transform {transform!r}; choose one of {', '.join(TRANSFORMS)}.")
        mode = TRANSFORMS[transform]
        if mode == self.crop_mode:
            return self
        fields = {k: getattr(self, k) for k in ("interpolation", "mean", "std")}
        side = min(self.input_size[1:])
        if mode == "squash":
            return DataConfig(
                input_size=self.input_size, resize_size=side, crop_pct=1.0, crop_mode=mode, **fields
            )
        return DataConfig.for_size(side, **fields)

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
        crop_mode = cfg.get("crop_mode") or "center"
        if crop_mode not in CROP_MODES:
            raise ConfigError(
                f"pretrained_cfg crop_mode {crop_mode!r} is not supported; plstitch runs "
                f"{', '.join(CROP_MODES)}."
            )
        return cls(
            input_size=input_size,
            resize_size=round(min(input_size[1:]) / crop_pct),
            crop_pct=crop_pct,
            interpolation=cfg.get("interpolation") or "bicubic",
            mean=tuple(cfg.get("mean") or IMAGENET_MEAN),
            std=tuple(cfg.get("std") or IMAGENET_STD),
            crop_mode=crop_mode,
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
            "crop_mode": self.crop_mode,
            "mean": list(self.mean),
            "std": list(self.std),
        }

    def describe(self) -> str:
        """One line for cards and logs: geometry (squash, or shorter side + crop), interpolation, mean/std."""
        h, w = self.crop_size
        if self.crop_mode == "squash":
            geometry = f"whole frame resized to {h}x{w} ({self.interpolation}, aspect not kept, no crop)"
        else:
            geometry = f"resize shorter side {self.resize_size} ({self.interpolation}), centre crop {h}x{w}"
        return f"{geometry}, mean {list(self.mean)}, std {list(self.std)}"

    @property
    def crop_size(self) -> tuple[int, int]:
        """(H, W) of the centre crop fed to the model."""
        return (self.input_size[1], self.input_size[2])


@dataclass(frozen=True)
class FramePlan:
    """How frames reach the model: sample at `fps`, resize shorter side to `resize`, centre crop `crop`
    (`squash`: resize the whole frame to `crop` instead).

        `crop_black_margin`: each video's black border is found first (`plstitch_eval.data.margin`) and cut
        before the resize; `margin` is the box of the video at hand (a per-video plan, `dataclasses.replace`).

        `resize_on_decode=False` (default) decodes at full size and resizes with the model's own interpolation
        (torchvision, uint8, antialiased), so pixels equal `EvalTransform`'s exactly; True lets FFmpeg/PIL
        resize while decoding (bilinear: faster on large videos, slightly different pixels).
    """

    fps: float | None
    resize: int
    crop: tuple[int, int]  # (H, W)
    interpolation: str
    mean: tuple[float, ...]
    std: tuple[float, ...]
    resize_on_decode: bool = False
    squash: bool = False
    clip: ClipSampling | None = None  # a clip encoder's window around each sampled frame; None: single frames
    crop_black_margin: bool = False
    margin: MarginBox | None = None  # the video's picture box (crop_black_margin); None: not found yet


def frame_plan(
    config: DataConfig,
    fps: float | None = None,
    resize_on_decode: bool = False,
    clip: ClipSampling | None = None,
    crop_black_margin: bool = False,
) -> FramePlan:
    """The resize/crop/normalise plan of a model's `DataConfig` (`fps`, `resize_on_decode`,
    `crop_black_margin`: extraction's; `clip`: a clip encoder's window, every frame of it prepared the same
    way)."""
    return FramePlan(
        fps=fps,
        resize=int(config.resize_size),
        crop=(int(config.input_size[1]), int(config.input_size[2])),
        interpolation=config.interpolation,
        mean=tuple(float(m) for m in config.mean),
        std=tuple(float(s) for s in config.std),
        resize_on_decode=resize_on_decode,
        squash=config.crop_mode == "squash",
        clip=clip,
        crop_black_margin=crop_black_margin,
    )


def to_uint8_chw(image: Image.Image | np.ndarray) -> torch.Tensor:
    """PIL image (made RGB) or uint8 HxWx3 RGB ndarray -> uint8 [3,H,W] tensor (a view for arrays)."""
    if isinstance(image, Image.Image):
        return tvf.pil_to_tensor(image.convert("RGB"))
    if not isinstance(image, np.ndarray):
        raise DataError(f"Expected a PIL image or uint8 HWC ndarray, got {type(image).__name__}.")
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise DataError(
            f"Expected a uint8 HxWx3 RGB array, got dtype {image.dtype} shape {image.shape}; "
            "convert the frame to RGB uint8 first."
        )
    with warnings.catch_warnings():  # decoded arrays may be read-only; we only read them (resize/crop copy)
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)


def resize_and_crop(images: torch.Tensor, plan: FramePlan) -> torch.Tensor:
    """uint8 [..., 3, H, W] -> uint8 [..., 3, h, w]: cut the plan's black-margin box (if any), resize shorter
    side (unless done on decode and no margin was cut), centre crop; with `plan.squash` the whole frame is
    resized to (h, w) instead.

    On CPU the uint8 resize is exact and the same per image or per batch; on CUDA torchvision resizes in float
    and rounds to uint8 levels (within 1 grey level of CPU).
    """
    cut = plan.margin is not None and not plan.margin.is_full
    if plan.margin is not None:  # the picture inside the video's black margin, before any resize
        images = crop_margin(images, plan.margin)
    if plan.squash:  # whole frame to the input size (after the decoder's shorter-side resize, if any)
        if tuple(images.shape[-2:]) != plan.crop:
            mode = INTERPOLATIONS[plan.interpolation]
            images = tvf.resize(images, list(plan.crop), interpolation=mode, antialias=True)
        return images
    if (cut or not plan.resize_on_decode) and min(images.shape[-2:]) != plan.resize:
        mode = INTERPOLATIONS[plan.interpolation]
        images = tvf.resize(images, [plan.resize], interpolation=mode, antialias=True)
    height, width = images.shape[-2:]
    if height < plan.crop[0] or width < plan.crop[1]:
        raise DecodeError(
            f"Frame resized to {height}x{width} is smaller than the model's {plan.crop[0]}x{plan.crop[1]} "
            "crop; the model's resize size must be at least its crop size."
        )
    return tvf.center_crop(images, list(plan.crop))


def prepare_frame(image: Image.Image | np.ndarray, plan: FramePlan) -> torch.Tensor:
    """One decoded frame -> its uint8 [3,h,w] model crop, on CPU (what decoding workers do)."""
    return resize_and_crop(to_uint8_chw(image), plan)


def normalize_crops(crops: torch.Tensor, plan: FramePlan) -> torch.Tensor:
    """uint8 crops [..., 3, h, w] -> float32 x/255, minus mean, over std, on the crops' device."""
    x = tvf.to_dtype(crops, torch.float32, scale=True)
    return tvf.normalize(x, list(plan.mean), list(plan.std), inplace=True)


class EvalTransform:
    """PIL image or uint8 HWC RGB ndarray -> normalised float tensor [3,h,w] (a model's eval transform)."""

    def __init__(self, config: DataConfig) -> None:
        self.config = config
        self.plan = frame_plan(config)

    def __call__(self, image: Image.Image | np.ndarray) -> torch.Tensor:
        return normalize_crops(prepare_frame(image, self.plan), self.plan)

    def __repr__(self) -> str:
        return f"EvalTransform({self.config})"


def preprocess_batch(images: torch.Tensor, config: DataConfig, device: torch.device | str) -> torch.Tensor:
    """Batched eval preprocessing on `device`: uint8 [B,H,W,3] or [B,3,H,W] -> float32 [B,3,h,w].

    The ops of `EvalTransform` on the whole batch: on CPU equal to it image by image, on CUDA within 1 grey
    level (see `resize_and_crop`). Decode on CPU, send uint8 to the device, resize there.
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
    images = images.contiguous().to(device, non_blocking=device.type == "cuda")
    plan = frame_plan(config)
    return normalize_crops(resize_and_crop(images, plan), plan)


__all__ = [
    "CROP_MODES",
    "INTERPOLATIONS",
    "TRANSFORMS",
    "EvalTransform",
    "FramePlan",
    "frame_plan",
    "normalize_crops",
    "prepare_frame",
    "preprocess_batch",
    "resize_and_crop",
    "to_uint8_chw",
]
