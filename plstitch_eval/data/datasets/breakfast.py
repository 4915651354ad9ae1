"""Breakfast in the MS-TCN layout: 1712 videos, 48 classes, 15 fps, 4 splits; `SIL` is scored as an action."""

from __future__ import annotations

from plstitch_eval.data.datasets.mstcn import MsTcnDataset
from plstitch_eval.data.datasets.registry import register_dataset


@register_dataset("breakfast")
class Breakfast(MsTcnDataset):
    """Breakfast action segmentation; evaluation at the native 15 fps unless `fps` is given."""

    name = "breakfast"
    display_name = "Breakfast"
    background_classes: list[str] = []
