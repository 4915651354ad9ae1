"""Converter tags -> loaders: how a registry entry's checkpoint (or a bare checkpoint's) becomes a module.

Every `ModelEntry.converter` names one tag, declared here once with its loader and facts
(`@register_converter`, `hub/converter_registry.py`, which derives `CONVERTERS`, `LOADERS`, `FEATURES`, ...).
A loader takes the checkpoint as `safe_load.load_checkpoint` read it (None for "pixels", built in code), the
registry entry (None for a bare checkpoint), which network of a training checkpoint, and the source for
messages; it returns the module, its eval preprocessing, the keys it dropped and a clip encoder's window.
A bare checkpoint has no entry to name its converter: `sniff_converter` reads it off the keys, and the name
goes through the same table.

A timm-format folder (a Hub repo without `filename`, an exported or run folder) names its own architecture in
its config.json and is loaded by `timm_format.load_timm_dir` whatever the tag (`hub/encoder.py`); the "timm"
loader here takes a checkpoint file given in a folder's place.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from torch import nn

from plstitch_eval.data.video import ClipSampling
from plstitch_eval.hub.architectures.clip_models import clip_layout, timesformer_clip
from plstitch_eval.hub.architectures.dinov3 import dinov3_from_state_dict, is_dinov3_checkpoint
from plstitch_eval.hub.architectures.pixels import PIXELS_DATA_CONFIG, build_raw_pixels
from plstitch_eval.hub.architectures.videomae_vit import videomae_from_state_dict
from plstitch_eval.hub.architectures.vjepa2 import vjepa2_from_state_dict
from plstitch_eval.hub.convert import (
    convnext_from_state_dict,
    is_convnext_state,
    unwrap_state_dict,
    vit_from_state_dict,
)
from plstitch_eval.hub.converter_registry import (
    CLIP_DEFAULTS,
    LOADERS,
    Converted,
    Loader,
    get_loader,
    register_converter,
)
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.model_registry import get_model_entry
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.utils.console import logger


def sniff_converter(checkpoint: Any, which: str = "teacher") -> str:
    """The converter a bare checkpoint's keys call for (no registry entry names one): a clip layout
    (`clip_models.clip_layout`), "dinov3", else "convnext" or "vit" (`image_layout`)."""
    clip = clip_layout(checkpoint, which)
    if clip is not None:
        return clip
    if is_dinov3_checkpoint(checkpoint, which):
        return "dinov3"
    return image_layout(checkpoint, which)


def image_layout(checkpoint: Any, which: str = "teacher") -> str:
    """The image converter of a checkpoint's keys: "convnext" for a ConvNeXt's, else "vit"; a
    `CheckpointError` when no state dict unwraps (as `convert.model_from_checkpoint` dispatches)."""
    return "convnext" if is_convnext_state(unwrap_state_dict(checkpoint, which)) else "vit"


def _expected(entry: ModelEntry | None) -> dict[str, Any] | None:
    return entry.expected if entry is not None else None


@register_converter("timm")
def _timm_checkpoint(checkpoint: Any, entry: ModelEntry | None, which: str, source: str) -> Converted:
    """A "timm" entry whose source is one checkpoint file, not a timm folder: ViT or ConvNeXt by its keys."""
    return get_loader(image_layout(checkpoint, which))(checkpoint, entry, which, source)


@register_converter("vit")
def _vit(checkpoint: Any, entry: ModelEntry | None, which: str, source: str) -> Converted:
    model, dropped = vit_from_state_dict(checkpoint, which, None, source, _expected(entry))
    return Converted(model, checkpoint_data_config(model, entry), dropped)


@register_converter("convnext", feature="globally pooled features")
def _convnext(checkpoint: Any, entry: ModelEntry | None, which: str, source: str) -> Converted:
    model, dropped = convnext_from_state_dict(checkpoint, which, source, _expected(entry))
    return Converted(model, checkpoint_data_config(model, entry), dropped)


@register_converter("dinov3")
def _dinov3(checkpoint: Any, entry: ModelEntry | None, which: str, source: str) -> Converted:
    """A DINOv3 ViT (timm Eva) at the entry's input size and LayerNorm epsilon (`model_args`), else 224 px
    and the released models' epsilon."""
    config = entry.data_config if entry is not None else None
    model, dropped = dinov3_from_state_dict(
        checkpoint,
        which=which,
        img_size=config.input_size[1] if config is not None else 224,
        source=source,
        expected=_expected(entry),
        **(entry.model_args if entry is not None else {}),
    )
    return Converted(model, checkpoint_data_config(model, entry), dropped)


@register_converter("pixels", feature="the frame downsampled to 8x8x3", weights=False)
def _pixels(checkpoint: Any, entry: ModelEntry | None, which: str, source: str) -> Converted:
    """The raw-pixels reference encoder, built in code (no checkpoint)."""
    model, data_config = build_raw_pixels((entry.data_config if entry else None) or PIXELS_DATA_CONFIG)
    return Converted(model, data_config, [])


ClipBuilder = Callable[
    ..., tuple[nn.Module, list[str]]
]  # `hub/architectures/clip_models.py`: a clip layout's strict builder


def _clip(
    converter: str, build: ClipBuilder, checkpoint: Any, entry: ModelEntry | None, which: str, source: str
) -> Converted:
    """A clip encoder with the entry's window and preprocessing; a bare checkpoint (no entry) is read with
    the window and preprocessing of the registry baseline of its layout, at its own window length."""
    baseline = entry or get_model_entry(CLIP_DEFAULTS[converter])
    clip = baseline.clip or ClipSampling(16)
    config = baseline.data_config or DataConfig.for_size(224)
    model, dropped = build(
        checkpoint,
        num_frames=clip.num_frames,
        img_size=config.input_size[1],
        which=which,
        source=source,
        expected=_expected(entry),
    )
    if entry is None and model.num_frames != clip.num_frames:
        clip = ClipSampling(model.num_frames, clip.frame_stride, clip.stride_seconds)
    return Converted(model, clip_data_config(model, baseline, config), dropped, clip)


def register_clip_converter(name: str, build: ClipBuilder, *, clip_default: str, **facts: Any) -> None:
    """Declare clip tag `name` once: its loader sizes `build` from the entry (or the `clip_default` baseline
    of a bare checkpoint); `facts` as `register_converter`'s (e.g. `feature`)."""
    register_converter(name, partial(_clip, name, build), clip=True, clip_default=clip_default, **facts)


# clip tags: a bare checkpoint gets the window and preprocessing of the registry baseline of its layout
register_clip_converter(
    "videomae",
    videomae_from_state_dict,
    feature="mean of the patch tokens after `fc_norm`",
    clip_default="videomaev2-vitb16",
)
register_clip_converter("timesformer", timesformer_clip, clip_default="endo-fm")
register_clip_converter(
    "vjepa2",
    vjepa2_from_state_dict,
    feature="mean of all tokens after the final norm",
    clip_default="vjepa2-vitl16",
)


def clip_data_config(model: nn.Module, entry: ModelEntry, config: DataConfig) -> DataConfig:
    """The entry's frame preprocessing at the clip model's input size (a TimeSformer's: its pos_embed)."""
    size = int(model.img_size)
    if config.input_size[1:] == (size, size):
        return config
    logger.warning(
        "%s expects %d px frames, not %d; scaling its preprocessing.", entry.name, size, config.input_size[1]
    )
    fields = {"interpolation": config.interpolation, "mean": config.mean, "std": config.std}
    if config.crop_mode == "squash":
        return DataConfig.whole_frame(size, **fields)
    return DataConfig.for_size(size, crop_pct=config.crop_pct, **fields)


def checkpoint_data_config(model: nn.Module, entry: ModelEntry | None) -> DataConfig:
    """The entry's preprocessing if it fits the model's input size, else DINO eval scaled to that size.

    ViTs have a fixed input size (their position embedding); CNNs take the entry's config as it is.
    """
    config = entry.data_config if entry is not None else None
    if not hasattr(model, "patch_embed"):
        return config or DataConfig.for_size(224)
    size = int(model.patch_embed.img_size[0])
    if config is None or config.input_size[1] != size:
        if config is not None:
            logger.warning(
                "%s expects %d px inputs, not %d; scaling its preprocessing.",
                entry.name,
                size,
                config.input_size[1],
            )
        return DataConfig.for_size(size, interpolation=config.interpolation if config else "bicubic")
    return config


__all__ = [
    "CLIP_DEFAULTS",
    "LOADERS",
    "Converted",
    "Loader",
    "checkpoint_data_config",
    "clip_data_config",
    "get_loader",
    "image_layout",
    "sniff_converter",
]
