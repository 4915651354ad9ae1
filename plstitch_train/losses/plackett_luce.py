"""PL-Stitch's L_vid: the Plackett-Luce negative log-likelihood of a clip's true frame order (the default).

`L_PL = sum_i [logsumexp(s_i, ..., s_K) - s_i] / K` per clip of K frames in true order, averaged over clips
(PL-Stitch, CVPR 2026, Eq. 1; Plackett 1975, Luce 1959). Numerics: `ranking.pl_loss_per_item`.
"""

from __future__ import annotations

from torch import Tensor

from plstitch_train.losses.objective import Objective
from plstitch_train.losses.ranking import pl_loss_per_item
from plstitch_train.losses.registry import register_objective

__all__ = ["PlackettLuceObjective"]


@register_objective
class PlackettLuceObjective(Objective):
    """Plackett-Luce NLL per item of the temporal head's frame scores [B, k], frames in true order."""

    name = "pl"

    def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
        """`mean_b L_PL(s_b) / k` of the scores `head_output` [B, k]; no target (the order is 0..k-1)."""
        return pl_loss_per_item(head_output)
