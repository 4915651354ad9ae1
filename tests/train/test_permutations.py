"""Permutation classes of a clip: enumeration order, limits, sampling and shuffling."""

from __future__ import annotations

import itertools

import pytest
import torch

import plstitch_train.permutations as permutations_module
from plstitch_eval.errors import ConfigError
from plstitch_train.permutations import (
    all_permutations,
    apply_permutation,
    check_clip_len,
    permutation_set,
    sample_permutation_indices,
)


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


# --- a sampled set of N classes (loss.permutation_classes) ---


@pytest.mark.parametrize(("k", "n"), [(4, 10), (8, 500), (12, 300)])
def test_a_sampled_set_is_n_distinct_permutations_identity_first(k: int, n: int) -> None:
    perms = permutation_set(k, n)
    assert perms.shape == (n, k) and perms.dtype == torch.long
    rows = [tuple(row) for row in perms.tolist()]
    assert len(set(rows)) == n  # distinct
    assert all(sorted(row) == list(range(k)) for row in rows)  # each a permutation of 0..k-1
    assert rows[0] == tuple(range(k))  # class 0 is the identity


def test_a_sampled_set_is_fixed_whatever_the_global_rng() -> None:
    torch.manual_seed(1)
    first = permutation_set(9, 200)
    torch.manual_seed(12345)
    state = torch.get_rng_state()
    fresh = permutations_module._sampled_table.__wrapped__(9, 200)  # recomputed, not the cached set
    assert torch.equal(torch.get_rng_state(), state)  # drawing a set leaves torch's global RNG alone
    assert torch.equal(fresh, first) and torch.equal(permutation_set(9, 200), first)
    assert torch.equal(permutation_set(9, 50), first[:50])  # a smaller set is the start of a larger one
    first[0] = 0  # callers get a copy: the cached set stays intact
    assert permutation_set(9, 200)[0].tolist() == list(range(9))


def test_zero_or_every_class_is_the_full_lexicographic_set() -> None:
    assert torch.equal(permutation_set(4), all_permutations(4))
    assert torch.equal(permutation_set(4, 0), all_permutations(4))
    assert torch.equal(permutation_set(4, 24), all_permutations(4))  # N == k!: all of them
    assert torch.equal(permutation_set(3, 6), torch.tensor(list(itertools.permutations(range(3)))))


def test_apply_permutation_with_a_sampled_set_matches_a_hand_written_gather() -> None:
    k, n = 10, 40
    frames = torch.randn(6, k, 3, 2, 2)
    perms = permutation_set(k, n).tolist()
    index = sample_permutation_indices(6, k, generator=torch.Generator().manual_seed(3), n_classes=n)
    assert index.min() >= 0 and index.max() < n
    out = apply_permutation(frames, index, n)
    expected = torch.stack([torch.stack([frames[b, j] for j in perms[int(index[b])]]) for b in range(6)])
    assert torch.equal(out, expected)
    assert torch.equal(apply_permutation(frames, torch.zeros(6, dtype=torch.long), n), frames)  # identity


def test_sampling_covers_every_class_of_the_set_and_draws_like_before_for_all() -> None:
    drawn = sample_permutation_indices(2000, 9, generator=torch.Generator().manual_seed(0), n_classes=7)
    assert sorted(drawn.unique().tolist()) == list(range(7))
    # n_classes 0 draws exactly as before the sampled sets existed: randint over k!
    old = torch.randint(24, (50,), generator=torch.Generator().manual_seed(5))
    assert torch.equal(sample_permutation_indices(50, 4, generator=torch.Generator().manual_seed(5)), old)


@pytest.mark.parametrize(
    ("k", "n", "message"),
    [
        (9, 0, r"permutation classification needs 1 <= clip_len <= 8 \(got 9"),
        (4, 25, r"permutation_classes 25 exceeds the 24 permutations of clip_len 4; set permutation_classes"),
        (8, 1, r"permutation_classes must be 0 \(every permutation\) or 2..40320 \(got 1\)"),
        (12, 40321, r"permutation_classes must be 0 \(every permutation\) or 2..40320 \(got 40321\)"),
    ],
)
def test_set_limits_are_one_line_config_errors(k: int, n: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        permutation_set(k, n)
    assert "\n" not in str(caught.value)
    with pytest.raises(ConfigError, match=message):
        check_clip_len(k, n)
    check_clip_len(12, 2)  # a sampled set lifts the clip_len limit
