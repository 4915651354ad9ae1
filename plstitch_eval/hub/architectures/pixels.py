"""Raw pixels as an encoder (`raw-pixels`): the reference row that shows what learned features add.

The ordinary eval preprocessing of `PIXELS_DATA_CONFIG` does all the work: shorter side to 8 px (bilinear with
antialias, i.e. an area-like average), centre crop 8x8, /255 with mean 0 / std 1 (values stay in [0, 1]).
`RawPixels` only flattens that input: 8*8*3 = 192-d features, no weights, nothing to download.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from plstitch_eval.errors import DataError
from plstitch_eval.preprocess import DataConfig

PIXELS_SPEC = "raw-pixels"  # its registry name
PIXELS_SIZE = 8
PIXELS_DATA_CONFIG = DataConfig(
    input_size=(3, PIXELS_SIZE, PIXELS_SIZE),
    resize_size=PIXELS_SIZE,
    crop_pct=1.0,
    interpolation="bilinear",
    mean=(0.0, 0.0, 0.0),
    std=(1.0, 1.0, 1.0),
)


class RawPixels(nn.Module):
    """Features = the model input flattened, channel-major: [B, 3, H, W] -> [B, 3*H*W]. Parameter-free.

    A zero-size non-persistent buffer follows `.to(device)`, so the module still has a device (and an
    empty state dict).
    """

    def __init__(self, input_size: tuple[int, int, int] = PIXELS_DATA_CONFIG.input_size) -> None:
        super().__init__()
        self.input_size = tuple(int(v) for v in input_size)
        self.num_features = math.prod(self.input_size)
        self.num_classes = 0
        self.register_buffer("device_anchor", torch.zeros(0), persistent=False)

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """[B, C, H, W] of the configured size -> [B, C*H*W]."""
        if tuple(x.shape[1:]) != self.input_size:
            raise DataError(
                f"raw-pixels expects inputs of shape [B, {', '.join(map(str, self.input_size))}], "
                f"got {list(x.shape)}; preprocess frames with its data config."
            )
        return x.flatten(1)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """No head: the flattened pixels are the features."""
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_features(x)


def build_raw_pixels(data_config: DataConfig = PIXELS_DATA_CONFIG) -> tuple[RawPixels, DataConfig]:
    """The raw-pixels module for `data_config`'s input size, with that config (what `load_encoder` uses)."""
    return RawPixels(data_config.input_size).eval(), data_config


__all__ = ["PIXELS_DATA_CONFIG", "PIXELS_SIZE", "RawPixels", "build_raw_pixels"]
