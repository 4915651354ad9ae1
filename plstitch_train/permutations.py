"""Permutation classes of a k-frame clip: enumerate, sample and apply them (data operations, no loss).

Class `p` is row `p` of `all_permutations(k)` (lexicographic order); shuffling a clip by class `p` puts frame
`perms[p, i]` at position `i`. Used by the permutation-classification baseline (Shuffle & Learn style).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import torch
from torch import Tensor

from plstitch_eval.errors import ConfigError

__all__ = [
    "MAX_PERMUTATION_CLIP_LEN",
    "all_permutations",
    "apply_permutation",
    "check_clip_len",
    "clip_len_of_classes",
    "sample_permutation_indices",
]

MAX_PERMUTATION_CLIP_LEN = 8  # 8! = 40320 classes; 9! = 362880 is too many for a classifier


def check_clip_len(k: int) -> None:
    """Raise `ConfigError` unless 1 <= k <= MAX_PERMUTATION_CLIP_LEN (k! classes must stay classifiable)."""
    if not 1 <= k <= MAX_PERMUTATION_CLIP_LEN:
        raise ConfigError(
            f"permutation classification needs 1 <= clip_len <= {MAX_PERMUTATION_CLIP_LEN} "
            f"(got {k}: {math.factorial(k) if k > 0 else 0} classes); "
            "use --objective pl or pairwise for longer clips"
        )


def clip_len_of_classes(n_classes: int) -> int | None:
    """The k with k! == n_classes, or None when n_classes is not a factorial."""
    k = 1
    while math.factorial(k) < n_classes:
        k += 1
    return k if math.factorial(k) == n_classes else None


@lru_cache(maxsize=16)
def _permutation_table(k: int) -> Tensor:
    return torch.tensor(list(itertools.permutations(range(k))), dtype=torch.long).reshape(-1, k)


def all_permutations(k: int) -> Tensor:
    """All k! permutations of `0..k-1` in lexicographic order, [k!, k] int64; row p is class p."""
    check_clip_len(k)
    return _permutation_table(k).clone()


def sample_permutation_indices(
    batch_size: int, k: int, generator: torch.Generator | None = None, device: torch.device | str = "cpu"
) -> Tensor:
    """Draw one permutation class per clip uniformly from the k! classes, [B] int64."""
    check_clip_len(k)
    return torch.randint(math.factorial(k), (batch_size,), generator=generator).to(device)


def apply_permutation(frames: Tensor, perm_index: Tensor) -> Tensor:
    """Shuffle each clip by its permutation class: `out[b, i] = frames[b, perms[perm_index[b], i]]`.

    `frames` is [B, k, ...]; the classifier then predicts `perm_index` from `out`.
    """
    k = frames.shape[1]
    perms = all_permutations(k).to(frames.device)[perm_index.to(frames.device)]  # [B, k]
    index = perms.reshape(*perms.shape, *([1] * (frames.dim() - 2))).expand_as(frames)
    return frames.gather(1, index)
