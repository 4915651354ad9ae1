"""Ranking losses (PL, pairwise hinge, permutation classification) against brute-force versions."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from plstitch_eval.errors import ConfigError
from plstitch_train.losses import (
    apply_permutation,
    pairwise_ranking_loss,
    permutation_classification_loss,
    permutation_logits_from_scores,
    pl_chance_level,
    pl_loss_per_item,
    plackett_luce_loss,
)

# --- Plackett-Luce ---


def textbook_pl_probability(scores: list[float], order: tuple[int, ...]) -> float:
    """P(order | s) = prod_i exp(s_order[i]) / sum_{j >= i} exp(s_order[j])."""
    prob = 1.0
    for i in range(len(order)):
        prob *= math.exp(scores[order[i]]) / sum(math.exp(scores[order[j]]) for j in range(i, len(order)))
    return prob


@pytest.mark.parametrize("k", [1, 2, 3, 4, 5, 6])
def test_pl_enumerated_probabilities_sum_to_one_and_match_textbook(k: int) -> None:
    scores = torch.randn(k, dtype=torch.float64) * 2
    perms = torch.tensor(list(itertools.permutations(range(k))), dtype=torch.long)
    losses = plackett_luce_loss(scores.expand(len(perms), k), order=perms, reduction="none")
    probs = torch.exp(-losses)
    assert probs.sum().item() == pytest.approx(1.0, abs=1e-10)
    expected = torch.tensor(
        [textbook_pl_probability(scores.tolist(), tuple(p)) for p in perms.tolist()], dtype=torch.float64
    )
    torch.testing.assert_close(losses, -torch.log(expected), rtol=1e-9, atol=1e-9)


def test_pl_default_order_is_identity_and_order_gathers() -> None:
    scores = torch.randn(4, 6, dtype=torch.float64)
    order = torch.stack([torch.randperm(6) for _ in range(4)])
    reordered = scores.gather(1, order)
    torch.testing.assert_close(
        plackett_luce_loss(scores, order=order, reduction="none"),
        plackett_luce_loss(reordered, reduction="none"),
    )
    identity = torch.arange(6).expand(4, 6)
    torch.testing.assert_close(plackett_luce_loss(scores), plackett_luce_loss(scores, order=identity))


def test_pl_correct_order_beats_reversed() -> None:
    scores = torch.tensor([[3.0, 2.0, 1.0, 0.0]])
    assert plackett_luce_loss(scores) < plackett_luce_loss(scores.flip(1))


def test_pl_reductions() -> None:
    scores = torch.randn(5, 7, dtype=torch.float64)
    per_list = plackett_luce_loss(scores, reduction="none")
    assert per_list.shape == (5,)
    torch.testing.assert_close(plackett_luce_loss(scores, reduction="sum"), per_list.sum())
    torch.testing.assert_close(plackett_luce_loss(scores, reduction="mean"), per_list.mean())
    torch.testing.assert_close(plackett_luce_loss(scores, reduction="mean_items"), per_list.sum() / (5 * 7))
    with pytest.raises(ConfigError, match="reduction"):
        plackett_luce_loss(scores, reduction="avg")


def test_pl_masked_lists_equal_unpadded_lists() -> None:
    generator = torch.Generator().manual_seed(1)
    k, batch = 8, 6
    scores = torch.randn(batch, k, dtype=torch.float64, generator=generator)
    order = torch.stack([torch.randperm(k, generator=generator) for _ in range(batch)])
    mask = torch.rand(batch, k, generator=generator) > 0.4
    mask[:, 0] = True
    padded = plackett_luce_loss(scores, order=order, mask=mask, reduction="none")
    for b in range(batch):
        kept = [j for j in order[b].tolist() if mask[b, j]]  # true order of the valid items only
        unpadded = plackett_luce_loss(scores[b, kept].unsqueeze(0), reduction="none")[0]
        torch.testing.assert_close(padded[b], unpadded)
    n_valid = mask.sum()
    torch.testing.assert_close(
        plackett_luce_loss(scores, order=order, mask=mask, reduction="mean_items"), padded.sum() / n_valid
    )


def test_pl_masked_gradients_are_finite_and_zero_on_padding() -> None:
    scores = torch.randn(3, 5, requires_grad=True)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 0, 1], [1, 1, 1, 1, 1]], dtype=torch.bool)
    plackett_luce_loss(scores, mask=mask).backward()
    assert torch.isfinite(scores.grad).all()
    assert (scores.grad[~mask] == 0).all()


def test_pl_gradcheck_float64() -> None:
    scores = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    order = torch.stack([torch.randperm(5) for _ in range(3)])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 1, 0], [0, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.autograd.gradcheck(
        lambda s: plackett_luce_loss(s, order=order, mask=mask, reduction="sum"), scores
    )
    assert torch.autograd.gradcheck(lambda s: plackett_luce_loss(s, reduction="none"), scores)


def test_pl_is_stable_for_large_scores_and_half_inputs() -> None:
    scores = torch.tensor([[1e4, -1e4, 5e3, 0.0]])
    loss = plackett_luce_loss(scores)
    # terms: lse(all) - 1e4 ~ 0; lse(-1e4, 5e3, 0) + 1e4 ~ 1.5e4; lse(5e3, 0) - 5e3 ~ 0; last = 0
    assert torch.isfinite(loss)
    assert loss.item() == pytest.approx(1.5e4, abs=1e-2)
    half = plackett_luce_loss(torch.randn(2, 8).half())
    assert half.dtype == torch.float32 and torch.isfinite(half)


def test_pl_single_item_is_zero() -> None:
    assert plackett_luce_loss(torch.randn(4, 1)).item() == 0.0


def test_pl_per_item_is_sum_over_batch_times_length_and_handles_padding() -> None:
    scores = torch.randn(3, 5, dtype=torch.float64)
    total = sum(
        sum(math.log(sum(math.exp(v) for v in row[i:])) - row[i] for i in range(5)) for row in scores.tolist()
    )
    assert pl_loss_per_item(scores).item() == pytest.approx(total / (3 * 5), rel=1e-9)  # authors' sum / (B*K)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] * 5])
    per_list = [plackett_luce_loss(scores[b : b + 1, : int(mask[b].sum())]).item() for b in range(3)]
    expected = sum(loss / int(mask[b].sum()) for b, loss in enumerate(per_list)) / 3
    assert pl_loss_per_item(scores, mask).item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("k", [2, 4, 7])
def test_pl_chance_level_is_uniform_scores_loss(k: int) -> None:
    """Equal scores make every order equally likely: loss log(k!) per list, log(k!)/k per item."""
    assert pl_chance_level(k) == pytest.approx(math.log(math.factorial(k)) / k)
    assert pl_loss_per_item(torch.zeros(2, k)).item() == pytest.approx(pl_chance_level(k), rel=1e-6)


def test_old_import_paths_keep_working() -> None:
    import plstitch_train.losses as losses
    from plstitch_train import permutations
    from plstitch_train.losses import ibot, ranking

    assert losses.apply_permutation is permutations.apply_permutation
    assert losses.MAX_PERMUTATION_CLIP_LEN == permutations.MAX_PERMUTATION_CLIP_LEN
    assert losses.IBOTLoss is ibot.IBOTLoss and losses.plackett_luce_loss is ranking.plackett_luce_loss


# --- pairwise hinge ---


def brute_pairwise(scores, order, mask, margin):
    per_list = []
    for b in range(scores.shape[0]):
        ranked = [j for j in order[b].tolist() if mask[b, j]]
        terms = [
            max(0.0, margin - (scores[b, ranked[i]].item() - scores[b, ranked[j]].item()))
            for i in range(len(ranked))
            for j in range(i + 1, len(ranked))
        ]
        per_list.append(sum(terms) / max(len(terms), 1))
    return torch.tensor(per_list, dtype=scores.dtype)


@pytest.mark.parametrize("margin", [1.0, 0.5])
def test_pairwise_matches_double_loop(margin: float) -> None:
    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(5, 6, dtype=torch.float64, generator=generator)
    order = torch.stack([torch.randperm(6, generator=generator) for _ in range(5)])
    mask = torch.rand(5, 6, generator=generator) > 0.3
    expected = brute_pairwise(scores, order, mask, margin)
    got = pairwise_ranking_loss(scores, order=order, mask=mask, margin=margin, reduction="none")
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(pairwise_ranking_loss(scores, order, mask, margin), expected.mean())
    torch.testing.assert_close(
        pairwise_ranking_loss(scores, order, mask, margin, reduction="sum"), expected.sum()
    )
    full = brute_pairwise(scores, torch.arange(6).expand(5, 6), torch.ones(5, 6, dtype=torch.bool), margin)
    torch.testing.assert_close(pairwise_ranking_loss(scores, margin=margin, reduction="none"), full)


def test_padding_values_never_leak() -> None:
    scores = torch.tensor([[2.0, float("nan"), 0.5, float("inf")]], requires_grad=True)
    mask = torch.tensor([[True, False, True, False]])
    for loss_fn in (plackett_luce_loss, pairwise_ranking_loss):
        loss = loss_fn(scores, mask=mask)
        assert torch.isfinite(loss)
        torch.testing.assert_close(loss, loss_fn(scores.detach()[:, [0, 2]]))
        (grad,) = torch.autograd.grad(loss, scores)
        assert torch.isfinite(grad).all() and (grad[~mask] == 0).all()


def test_pairwise_zero_when_ordered_with_margin() -> None:
    scores = torch.tensor([[4.0, 2.5, 1.0, -1.0]])
    assert pairwise_ranking_loss(scores).item() == 0.0
    assert pairwise_ranking_loss(scores.flip(1)).item() > 0


# --- permutation classification ---


def test_permutation_loss_matches_manual_cross_entropy() -> None:
    logits = torch.randn(4, 24, dtype=torch.float64)
    target = torch.tensor([0, 7, 23, 11])
    manual = torch.stack([-(logits[b, target[b]] - torch.logsumexp(logits[b], 0)) for b in range(4)])
    torch.testing.assert_close(
        permutation_classification_loss(logits, target, reduction="none").double(), manual
    )
    assert permutation_classification_loss(logits, target).item() == pytest.approx(
        manual.mean().item(), rel=1e-6
    )
    with pytest.raises(ConfigError, match="k!"):
        permutation_classification_loss(torch.randn(2, 10), torch.tensor([0, 1]))


def test_permutation_loss_over_a_sampled_set() -> None:
    logits = torch.randn(3, 1000, dtype=torch.float64)  # 1,000 sampled orders of an 8-frame clip
    target = torch.tensor([0, 999, 412])
    manual = torch.stack([-(logits[b, target[b]] - torch.logsumexp(logits[b], 0)) for b in range(3)])
    ours = permutation_classification_loss(logits, target, reduction="none", n_classes=1000)
    torch.testing.assert_close(ours.double(), manual)
    with pytest.raises(ConfigError, match="one column per sampled order"):
        permutation_classification_loss(torch.randn(2, 24), torch.tensor([0, 1]), n_classes=1000)


def test_permutation_logits_from_scores_are_pl_likelihoods_of_the_shuffle() -> None:
    scores = torch.randn(3, 4, dtype=torch.float64)
    logits = permutation_logits_from_scores(scores)
    assert logits.shape == (3, 24)
    torch.testing.assert_close(torch.logsumexp(logits, dim=1), torch.zeros(3, dtype=torch.float64))
    perms = list(itertools.permutations(range(4)))
    frames_order = torch.arange(4.0).view(1, 4, 1).expand(3, 4, 1)
    for b, p in enumerate([0, 9, 23]):
        shuffled = apply_permutation(frames_order, torch.tensor([p] * 3))[
            b, :, 0
        ]  # original frame at each position
        assert shuffled.tolist() == list(perms[p])
        # true order of the shuffled positions: the position holding frame 0, then frame 1, ...
        true_order = tuple(int(i) for i in shuffled.argsort())
        expected = math.log(textbook_pl_probability(scores[b].tolist(), true_order))
        assert logits[b, p].item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("k", [3, 5])
@pytest.mark.parametrize("padded", [False, True])
def test_pl_per_item_divides_each_list_by_its_length_k(k: int, padded: bool) -> None:
    """mean_b (1/K_b) sum_{i<K_b} [log sum_{i<=j<K_b} exp(s_j) - s_i], K_b = valid items (not K_b - 1)."""
    generator = torch.Generator().manual_seed(k)
    scores = torch.randn(4, k, generator=generator, dtype=torch.float64) * 2
    lengths = [k, k - 1, 2, k] if padded else [k] * 4
    mask = torch.arange(k).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1) if padded else None
    expected = 0.0
    for row, n in zip(scores.tolist(), lengths, strict=True):
        nll = sum(math.log(sum(math.exp(v) for v in row[i:n])) - row[i] for i in range(n))
        expected += nll / n / len(lengths)
    assert pl_loss_per_item(scores, mask).item() == pytest.approx(expected, rel=1e-9)
