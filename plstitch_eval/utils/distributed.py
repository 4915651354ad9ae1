"""torchrun process-group setup shared by extraction and training (nccl on CUDA, gloo on CPU)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

# Ranks with less work wait at the final collective; the default 30 min timeout would kill them on long jobs.
DIST_TIMEOUT = timedelta(hours=24)


@dataclass
class DistInfo:
    """Rank and world size of this process; `owned` when we initialised the process group ourselves."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    owned: bool = False

    @property
    def active(self) -> bool:
        """True under torchrun with more than one process."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 writes shared files (manifests, checkpoints, logs)."""
        return self.rank == 0


def init_distributed(device: torch.device) -> tuple[DistInfo, torch.device]:
    """Join the torchrun process group when WORLD_SIZE > 1; on CUDA pin this rank to its local GPU."""
    info = DistInfo()
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 or dist.is_initialized():
        if not dist.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            dist.init_process_group(backend=backend, timeout=DIST_TIMEOUT)
            info.owned = True
        info.rank, info.world_size = dist.get_rank(), dist.get_world_size()
        info.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda" and device.index is None:
        # torch.cuda.set_device refuses a bare "cuda": name the rank's GPU, or the current one when alone
        device = torch.device("cuda", info.local_rank if info.active else torch.cuda.current_device())
    if device.type == "cuda":
        torch.cuda.set_device(device)
    return info, device


def teardown_distributed(info: DistInfo) -> None:
    """Destroy the process group if this process created it."""
    if info.owned and dist.is_initialized():
        dist.destroy_process_group()
