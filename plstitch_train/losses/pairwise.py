"""The pairwise-hinge baseline of PL-Stitch's objective ablation: every ordered frame pair, margin 1.

`L = mean_{i<j} max(0, 1 - (s_i - s_j))` per clip in true order, averaged over clips (RankSVM style,
Herbrich et al. 2000). Numerics: `ranking.pairwise_ranking_loss`.
"""

from __future__ import annotations

from torch import Tensor

from plstitch_train.losses.objective import Objective
from plstitch_train.losses.ranking import pairwise_ranking_loss
from plstitch_train.losses.registry import register_objective

__all__ = ["PairwiseObjective"]


@register_objective
class PairwiseObjective(Objective):
    """Pairwise hinge (margin 1) on the temporal head's frame scores [B, k], frames in true order."""

    name = "pairwise"

    def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
        """Mean hinge over the k(k-1)/2 pairs of each clip, then over clips; no target."""
        return pairwise_ranking_loss(head_output)
