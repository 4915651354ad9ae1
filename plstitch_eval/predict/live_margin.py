"""The black-margin box of a live source (a probe made with `--crop-black-margin`): a stream cannot be read
ahead, so the box is found on its first seconds, whose frames are held and then go on to the model."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from itertools import chain
from typing import Any

import numpy as np
import torch

from plstitch_eval.data.margin import MarginBox, detect_black_margin
from plstitch_eval.predict.live import Captured
from plstitch_eval.preprocess import FramePlan

LIVE_MARGIN_S = 5.0  # a live source's black-margin box is found on its first seconds (no reading ahead)


def live_margin(
    samples: Iterator[Captured], plan: FramePlan, seconds: float = LIVE_MARGIN_S
) -> tuple[Iterator[Captured], FramePlan, dict[str, Any]]:
    """The black-margin box of a live source, found on its first `seconds` (a stream cannot be read ahead):
    the frames of those seconds are held, the box found on them, then they go on to the model."""
    held: list[Captured] = []
    for sample in samples:
        held.append(sample)
        if sample.frame.time >= seconds:
            break
    images = [torch.from_numpy(np.ascontiguousarray(s.frame.image)).permute(2, 0, 1) for s in held]
    box = detect_black_margin(torch.stack(images)) if images else MarginBox()
    record = {
        **box.to_dict(),
        "found_on_s": round(held[-1].frame.time, 6) if held else 0.0,
        "found_on_frames": len(held),
    }
    return chain(held, samples), replace(plan, margin=box), record
