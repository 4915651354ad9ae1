"""Clip encoders (one feature per window of frames): recognising their checkpoints and loading them strictly.

Three layouts: VideoMAE V2 (converter "videomae", `architectures/videomae_vit.py`), the divided space-time
TimeSformer of Endo-FM (converter "timesformer", `architectures/timesformer.py`) and V-JEPA 2 in transformers'
`VJEPA2Model` layout (converter "vjepa2", `architectures/vjepa2.py`). Image checkpoints go through
`hub/convert.py` (and `architectures/dinov3.py`).
Each clip tag is declared once, with its builder, where `hub/converters.py` registers it; every builder takes
``(checkpoint, *, num_frames, img_size, which, source, expected) -> (model, dropped keys)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub.architectures.timesformer import timesformer_from_state_dict
from plstitch_eval.hub.convert import unwrap_state_dict

__all__ = ["clip_layout", "timesformer_clip"]


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


def timesformer_clip(
    checkpoint: Any,
    *,
    num_frames: int,
    img_size: int,
    which: str,
    source: str,
    expected: Mapping[str, Any] | None,
) -> tuple[nn.Module, list[str]]:
    """A TimeSformer reads its window length and frame size from its tensors (`time_embed`, `pos_embed`), so
    it takes the clip builders' arguments and ignores `num_frames` and `img_size`."""
    return timesformer_from_state_dict(checkpoint, which=which, source=source, expected=expected)
