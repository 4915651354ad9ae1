"""Permutation classes of a k-frame clip: enumerate, sample and apply them (data operations, no loss).

The classes are the rows of a permutation set: by default every permutation of `0..k-1`
(`all_permutations(k)`, lexicographic, k <= 8), or with `n_classes` N > 0 a fixed set of N distinct ones
(`permutation_set(k, N)`, identity first, the same in every run and seed). Class `p` is row `p` of the set;
shuffling a clip by class `p` puts frame `perms[p, i]` at position `i`. Used by the permutation-classification
baseline (Shuffle & Learn style).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import torch
from torch import Tensor

from plstitch_train.config.permutation_limits import (
    MAX_PERMUTATION_CLASSES,
    MAX_PERMUTATION_CLIP_LEN,
    check_clip_len,
)

__all__ = [
    "MAX_PERMUTATION_CLASSES",
    "MAX_PERMUTATION_CLIP_LEN",
    "PERMUTATION_SET_SEED",
    "all_permutations",
    "apply_permutation",
    "check_clip_len",
    "clip_len_of_classes",
    "permutation_set",
    "sample_permutation_indices",
]

# seed of the sampled class sets: one fixed set per (k, N), whatever the run's seed or torch's global RNG
PERMUTATION_SET_SEED = 20_170_604
_DRAW_CHUNK = 4096  # permutations drawn at a time while sampling a set


def clip_len_of_classes(n_classes: int) -> int | None:
    """The k with k! == n_classes, or None when n_classes is not a factorial."""
    k = 1
    while math.factorial(k) < n_classes:
        k += 1
    return k if math.factorial(k) == n_classes else None


@lru_cache(maxsize=16)
def _permutation_table(k: int) -> Tensor:
    return torch.tensor(list(itertools.permutations(range(k))), dtype=torch.long).reshape(-1, k)


@lru_cache(maxsize=16)
def _sampled_table(k: int, n_classes: int) -> Tensor:
    """Identity, then distinct permutations in the order a generator seeded PERMUTATION_SET_SEED draws them.

    Draws uniform permutations (argsort of uniform noise) chunk by chunk and drops repeats, so k! is never
    enumerated; the draws do not depend on N, so a smaller set is the start of a larger one.
    """
    generator = torch.Generator().manual_seed(PERMUTATION_SET_SEED)
    identity = tuple(range(k))
    rows: dict[tuple[int, ...], None] = {identity: None}  # insertion-ordered set
    while len(rows) < n_classes:
        drawn = torch.rand(_DRAW_CHUNK, k, generator=generator).argsort(dim=1, stable=True)
        for row in map(tuple, drawn.tolist()):
            rows.setdefault(row, None)
            if len(rows) == n_classes:
                break
    return torch.tensor(list(rows), dtype=torch.long).reshape(-1, k)


def _table(k: int, n_classes: int) -> Tensor:
    """The cached set (not to be modified): every permutation when n_classes is 0 or k!, else sampled."""
    check_clip_len(k, n_classes)
    if n_classes == 0 or n_classes == math.factorial(k):
        return _permutation_table(k)
    return _sampled_table(k, n_classes)


def all_permutations(k: int) -> Tensor:
    """All k! permutations of `0..k-1` in lexicographic order, [k!, k] int64; row p is class p."""
    check_clip_len(k)
    return _permutation_table(k).clone()


def permutation_set(k: int, n_classes: int = 0) -> Tensor:
    """The permutation classes of a k-frame clip, [P, k] int64; row p is class p, row 0 the identity.

    `n_classes` 0: all k! permutations (`all_permutations`, k <= 8). N > 0: N distinct permutations, drawn
    once from a torch.Generator seeded `PERMUTATION_SET_SEED` (independent of torch's global RNG, so every
    run and seed classifies the same set), identity first; N == k! gives all of them, lexicographic.
    """
    return _table(k, n_classes).clone()


def sample_permutation_indices(
    batch_size: int,
    k: int,
    generator: torch.Generator | None = None,
    device: torch.device | str = "cpu",
    n_classes: int = 0,
) -> Tensor:
    """Draw one permutation class per clip uniformly from the set's classes (k! by default), [B] int64."""
    n_rows = len(_table(k, n_classes))
    return torch.randint(n_rows, (batch_size,), generator=generator).to(device)


def apply_permutation(frames: Tensor, perm_index: Tensor, n_classes: int = 0) -> Tensor:
    """Shuffle each clip by its permutation class: `out[b, i] = frames[b, perms[perm_index[b], i]]`.

    `frames` is [B, k, ...]; `perms = permutation_set(k, n_classes)`; the classifier then predicts
    `perm_index` from `out`.
    """
    k = frames.shape[1]
    perms = _table(k, n_classes).to(frames.device)[perm_index.to(frames.device)]  # [B, k]
    index = perms.reshape(*perms.shape, *([1] * (frames.dim() - 2))).expand_as(frames)
    return frames.gather(1, index)
