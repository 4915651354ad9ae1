"""GTEA in the MS-TCN layout: 28 videos, 11 classes, 15 fps, four splits; `background` is not scored."""

from __future__ import annotations

from plstitch_eval.data.datasets.mstcn import MsTcnDataset
from plstitch_eval.data.datasets.registry import register_dataset


@register_dataset("gtea")
class Gtea(MsTcnDataset):
    """GTEA action segmentation; evaluation at the native 15 fps unless `fps` is given."""

    name = "gtea"
    display_name = "GTEA"
    background_classes = ["background"]
