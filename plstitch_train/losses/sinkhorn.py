"""Sinkhorn-Knopp teacher targets (DINOv2's centring): a batch's soft assignments to the prototypes, made to
use every prototype equally, so a teacher whose outputs all look alike cannot hand one target to all.

Why: at small batch and model scale iBOT's EMA centre does not stop the teacher from collapsing to one output
for every image (docs/reproduce.md, issue 32); DINOv2 (Oquab et al., 2024) replaces it with these targets.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch import Tensor

from plstitch_train.config.loss import CENTERINGS  # its home: the config checks it without torch

__all__ = ["CENTERINGS", "sinkhorn_knopp"]


@torch.no_grad()
def sinkhorn_knopp(logits: Tensor, temperature: float, n_iterations: int = 3) -> Tensor:
    """Targets [B, K] (rows sum to 1) from teacher logits [B, K]: exp(logits / T) scaled alternately so each
    prototype gets 1/K of the batch's mass and each row 1/B, `n_iterations` times (prototypes first).

    Computed in the log domain (sharp logits cannot underflow to 0/0). Under torch.distributed the batch is
    the union of every rank's rows (the prototype sums are all-reduced), as in DINOv2.
    """
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    log_q = logits.float() / temperature
    rows = torch.tensor(float(log_q.shape[0]), device=log_q.device)
    if world > 1:
        dist.all_reduce(rows)
    log_protos, log_rows = math.log(log_q.shape[1]), torch.log(rows)
    for _ in range(n_iterations):
        log_q = log_q - _logsumexp_over_batch(log_q, world) - log_protos
        log_q = log_q - torch.logsumexp(log_q, dim=1, keepdim=True) - log_rows
    return torch.exp(log_q + log_rows)


def _logsumexp_over_batch(log_q: Tensor, world: int) -> Tensor:
    """log of each prototype's summed mass [1, K] over the rows of every rank."""
    if world == 1:
        return torch.logsumexp(log_q, dim=0, keepdim=True)
    peak = log_q.max(0, keepdim=True).values
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)
    mass = torch.exp(log_q - peak).sum(0, keepdim=True)
    dist.all_reduce(mass)
    return peak + torch.log(mass)
