"""Ranking losses: Plackett-Luce (PL-Stitch), pairwise hinge and permutation classification (ablations).

Conventions: `scores[b, j]` is the score of item `j` of list `b` (a higher score ranks earlier); `order[b, i]`
is the index of the item that truly comes i-th (default `0..K-1`); `mask[b, j]` (bool) marks the valid items
of padded lists - masked items are dropped, so a padded list scores exactly like the unpadded one.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from plstitch_eval.errors import ConfigError
from plstitch_train.permutations import all_permutations, clip_len_of_classes

__all__ = [
    "pairwise_ranking_loss",
    "permutation_classification_loss",
    "permutation_logits_from_scores",
    "pl_chance_level",
    "pl_loss_per_item",
    "plackett_luce_loss",
]

REDUCTIONS = ("mean", "sum", "none", "mean_items")


def _check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ConfigError(f"unknown reduction {reduction!r}; use one of {', '.join(REDUCTIONS)}")


def _ranked(scores: Tensor, order: Tensor | None, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """Return (scores in true rank order [B,K], validity of each rank position [B,K] bool)."""
    if scores.dim() != 2:
        raise ConfigError(f"scores must be [B, K], got shape {tuple(scores.shape)}")
    if mask is None:
        valid = torch.ones_like(scores, dtype=torch.bool)
    else:
        if mask.shape != scores.shape:
            raise ConfigError(f"mask shape {tuple(mask.shape)} must equal scores shape {tuple(scores.shape)}")
        valid = mask.to(device=scores.device, dtype=torch.bool)
    if order is None:
        return scores, valid
    if order.shape != scores.shape:
        raise ConfigError(f"order shape {tuple(order.shape)} must equal scores shape {tuple(scores.shape)}")
    order = order.to(device=scores.device, dtype=torch.long)
    return scores.gather(1, order), valid.gather(1, order)


def _reduce(per_list: Tensor, reduction: str, n_items: Tensor) -> Tensor:
    if reduction == "none":
        return per_list
    if reduction == "sum":
        return per_list.sum()
    if reduction == "mean":
        return per_list.mean()
    return per_list.sum() / n_items.sum().clamp(min=1)  # mean_items


def _upcast(x: Tensor) -> Tensor:
    """Half/bfloat16 -> float32 for log-sum-exp and softmax; float32/64 unchanged."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def plackett_luce_loss(
    scores: Tensor, order: Tensor | None = None, mask: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """Plackett-Luce negative log-likelihood of the true order given the scores.

    Per list: `L_PL = sum_i [logsumexp(s_r(i), ..., s_r(K)) - s_r(i)]` (PL-Stitch, CVPR 2026, Eq. 1; Plackett
    1975, Luce 1959), computed stably as a reversed `logcumsumexp` over the scores gathered in true order.
    `reduction`: "sum" / "mean" over lists, "none" ([B]), or "mean_items" = total / number of valid items (the
    authors' code divides by B*K).
    """
    _check_reduction(reduction)
    ranked, valid = _ranked(scores, order, mask)
    ranked = _upcast(ranked)
    # Masked items get a huge finite negative score: exp() of it is exactly 0 in every suffix sum, and unlike
    # -inf it keeps the backward pass free of NaNs.
    very_negative = torch.finfo(ranked.dtype).min / 4
    ranked = torch.where(valid, ranked, torch.full_like(ranked, very_negative))
    suffix_lse = torch.logcumsumexp(ranked.flip(1), dim=1).flip(1)
    terms = torch.where(valid, suffix_lse - ranked, torch.zeros_like(ranked))
    return _reduce(terms.sum(1), reduction, valid.sum(1))


def pl_loss_per_item(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """PL NLL of the default order `0..K-1` divided by each list's length, averaged over lists.

    `mean_b L_PL(s_b) / K_b`: the authors' sum / (B*K) when every list has K items; a plain mean over samples
    for padded lists, so gradient accumulation and DDP shards add up exactly to the full batch.
    """
    per_list = plackett_luce_loss(scores, mask=mask, reduction="none")
    lengths = scores.new_full((scores.shape[0],), scores.shape[1]) if mask is None else mask.sum(1)
    return (per_list / lengths.clamp(min=1)).mean()


def pairwise_ranking_loss(
    scores: Tensor,
    order: Tensor | None = None,
    mask: Tensor | None = None,
    margin: float = 1.0,
    reduction: str = "mean",
) -> Tensor:
    """Pairwise hinge over all ordered pairs i < j of the true order: `max(0, margin - (s_r(i) - s_r(j)))`.

    The margin-ranking baseline of PL-Stitch's objective ablation (RankSVM style, Herbrich et al. 2000).
    Averaged over the valid pairs of each list, then reduced over lists ("mean_items" = total over all pairs /
    number of valid pairs).
    """
    _check_reduction(reduction)
    ranked, valid = _ranked(scores, order, mask)
    diff = ranked.unsqueeze(2) - ranked.unsqueeze(1)  # [B, K, K]: s_r(i) - s_r(j)
    k = ranked.shape[1]
    upper = torch.ones(k, k, dtype=torch.bool, device=ranked.device).triu(1)
    pair_valid = upper & valid.unsqueeze(2) & valid.unsqueeze(1)
    hinge = torch.where(pair_valid, torch.clamp(margin - diff, min=0), torch.zeros_like(diff))
    n_pairs = pair_valid.sum((1, 2))
    if reduction == "mean_items":
        return hinge.sum() / n_pairs.sum().clamp(min=1)
    per_list = hinge.sum((1, 2)) / n_pairs.clamp(min=1)
    return _reduce(per_list, reduction, n_pairs)


def permutation_classification_loss(
    logits: Tensor, target_perm_index: Tensor, reduction: str = "mean", n_classes: int = 0
) -> Tensor:
    """Cross-entropy over the shuffles of a clip: `-log softmax(logits)[p]` for the applied shuffle p.

    The permutation-classification baseline of PL-Stitch's objective ablation (order prediction as in
    Lee et al., ICCV 2017); `logits` [B, P], `target_perm_index` [B] int64. `n_classes` 0: P must be a k!
    (every shuffle); N > 0: the sampled set `permutation_set(k, N)`, so P must be N.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ConfigError(f"unknown reduction {reduction!r}; use mean, sum or none")
    width = logits.shape[-1]
    if n_classes == 0 and clip_len_of_classes(width) is None:
        raise ConfigError(f"permutation logits must have k! classes, got {width}")
    if n_classes > 0 and width != n_classes:
        raise ConfigError(
            f"permutation logits must have one column per sampled order ({n_classes}), got {width}"
        )
    return F.cross_entropy(_upcast(logits), target_perm_index.to(logits.device).long(), reduction=reduction)


def permutation_logits_from_scores(scores: Tensor) -> Tensor:
    """Per-frame scores of a shuffled clip [B, k] -> logits over the k! shuffles [B, k!].

    Logit of class p = `log P_PL(true order | s)` if the clip was shuffled by permutation p
    (`apply_permutation`), i.e. the Plackett-Luce log-likelihood of the order `argsort(perms[p])`; the
    logits are normalised, so the cross-entropy on them equals the PL loss of the applied shuffle.
    """
    batch, k = scores.shape
    perms = all_permutations(k).to(scores.device)
    true_orders = perms.argsort(dim=1)  # item at position i is frame perms[p, i]
    expanded = scores.unsqueeze(1).expand(batch, len(perms), k).reshape(-1, k)
    orders = true_orders.unsqueeze(0).expand(batch, -1, -1).reshape(-1, k)
    return -plackett_luce_loss(expanded, order=orders, reduction="none").view(batch, len(perms))


def pl_chance_level(n_items: int) -> float:
    """Per-item PL loss of uninformative scores: `log(K!) / K` (every order equally likely)."""
    return math.lgamma(n_items + 1) / n_items
