"""Extraction under `torchrun` (RANK/WORLD_SIZE set): rank r takes videos[r::world_size] (`my_share`), rank 0
opens the store and shares its setup error (`broadcast_error`), and every rank gets every rank's results
(`gather_results`)."""

from __future__ import annotations

import torch.distributed as dist

from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract.summary import VideoResult
from plstitch_eval.utils.distributed import DistInfo


def my_share(count: int, info: DistInfo) -> list[int]:
    """Indices of the `count` videos this rank extracts: every world_size-th one, from its rank on."""
    return list(range(count))[info.rank :: info.world_size]


def broadcast_error(info: DistInfo, error: str | None) -> None:
    """Share rank 0's setup error (e.g. an incompatible store) so every rank stops instead of hanging."""
    if not info.active:
        return
    box = [error]
    dist.broadcast_object_list(box, src=0)
    if box[0] is not None:
        raise FeatureStoreError(box[0])


def gather_results(info: DistInfo, results: list[VideoResult]) -> list[VideoResult]:
    """Collect every rank's per-video results on every rank."""
    if not info.active:
        return results
    gathered: list[list[VideoResult] | None] = [None] * info.world_size
    dist.all_gather_object(gathered, results)
    return [r for part in gathered for r in (part or [])]
