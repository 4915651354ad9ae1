"""Permutation classes of a clip: enumeration order, limits, sampling and shuffling."""

from __future__ import annotations

import itertools

import pytest
import torch

from plstitch_eval.errors import ConfigError
from plstitch_train.permutations import all_permutations, apply_permutation, sample_permutation_indices


def test_all_permutations_lexicographic_and_limits() -> None:
    assert all_permutations(3).tolist() == [list(p) for p in itertools.permutations(range(3))]
    assert all_permutations(5).shape == (120, 5)
    with pytest.raises(ConfigError, match="clip_len"):
        all_permutations(9)


def test_apply_permutation_and_sampling() -> None:
    frames = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    index = torch.tensor([5, 23])
    perms = list(itertools.permutations(range(4)))
    out = apply_permutation(frames, index)
    for b in range(2):
        for i in range(4):
            torch.testing.assert_close(out[b, i], frames[b, perms[index[b]][i]])
    drawn = sample_permutation_indices(1000, 3, generator=torch.Generator().manual_seed(0))
    assert drawn.min() >= 0 and drawn.max() <= 5 and len(drawn.unique()) == 6
