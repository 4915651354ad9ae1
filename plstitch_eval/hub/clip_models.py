"""Clip encoders (one feature per window of frames): recognising their checkpoints and loading them strictly.

Three layouts: VideoMAE V2 (converter "videomae", `hub/videomae_vit.py`), the divided space-time TimeSformer
of Endo-FM (converter "timesformer", `hub/timesformer.py`) and V-JEPA 2 in transformers' `VJEPA2Model` layout
(converter "vjepa2", `hub/vjepa2.py`). Image checkpoints go through `hub/convert.py` (and `hub/dinov3.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub.convert import unwrap_state_dict
from plstitch_eval.hub.model_entry import CLIP_CONVERTERS
from plstitch_eval.hub.timesformer import timesformer_from_state_dict
from plstitch_eval.hub.videomae_vit import videomae_from_state_dict
from plstitch_eval.hub.vjepa2 import vjepa2_from_state_dict

__all__ = ["CLIP_BUILDERS", "CLIP_CONVERTERS", "clip_layout", "clip_model_from_checkpoint"]


def clip_layout(checkpoint: Any, which: str = "teacher") -> str | None:
    """The clip converter whose layout `checkpoint` has ("vjepa2": transformers' `VJEPA2Model` encoder;
    "videomae": Conv3d tubelet patches; "timesformer": a `time_embed`), or None for anything else (image
    checkpoints, or what cannot be unwrapped)."""
    try:
        state = unwrap_state_dict(checkpoint, which)
    except CheckpointError:
        return None
    if "embeddings.patch_embeddings.proj.weight" in state and any(k.startswith("layer.") for k in state):
        return "vjepa2"  # `encoder.` was removed by unwrapping
    proj = state.get("patch_embed.proj.weight")
    if isinstance(proj, torch.Tensor) and proj.ndim == 5:
        return "videomae"
    if "time_embed" in state:
        return "timesformer"
    return None


def _timesformer(
    checkpoint: Any,
    *,
    num_frames: int,
    img_size: int,
    which: str,
    source: str,
    expected: Mapping[str, Any] | None,
) -> tuple[nn.Module, list[str]]:
    """A TimeSformer reads its window length and frame size from its tensors (`time_embed`, `pos_embed`)."""
    return timesformer_from_state_dict(checkpoint, which=which, source=source, expected=expected)


# clip converter -> its strict loader, called with the window length and frame size of the entry
CLIP_BUILDERS: dict[str, Callable[..., tuple[nn.Module, list[str]]]] = {
    "videomae": videomae_from_state_dict,
    "timesformer": _timesformer,
    "vjepa2": vjepa2_from_state_dict,
}


def clip_model_from_checkpoint(
    checkpoint: Any,
    converter: str,
    *,
    num_frames: int,
    img_size: int,
    which: str = "teacher",
    source: str = "checkpoint",
    expected: Mapping[str, Any] | None = None,
) -> tuple[nn.Module, list[str]]:
    """(clip model in eval mode, dropped head keys) for `converter`; `num_frames` and `img_size` size the
    VideoMAE V2 position table and V-JEPA 2's window (a TimeSformer reads both from its tensors)."""
    build = CLIP_BUILDERS.get(converter)
    if build is None:
        raise ConfigError(
            f"Unknown clip converter {converter!r}; choose one of {', '.join(CLIP_CONVERTERS)}."
        )
    return build(
        checkpoint, num_frames=num_frames, img_size=img_size, which=which, source=source, expected=expected
    )
