"""`toy-margin`: a margin ranking L_vid on consecutive frames, a training objective from another package.

The temporal head scores the k frames of each clip in true order, s_1..s_k; every frame should outscore the
next one by a margin m (earlier frames score higher, as PL-Stitch's own objectives rank them):

    L_vid = 1/(B (k-1)) * sum_b sum_{t=1}^{k-1} max(0, m - (s_{b,t} - s_{b,t+1})),   m = MARGIN = 0.5

(`torch.nn.functional.margin_ranking_loss` with target +1). It is the pairwise hinge restricted to
neighbouring frames: k-1 pairs a clip instead of k(k-1)/2.

`plstitch train --objective toy-margin` trains it: the entry point's name (pyproject.toml) is this name, so
the config accepts it before torch is imported; the model imports this module when it builds the objective.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.nn import functional as F

from plstitch_train.losses.objective import Objective
from plstitch_train.losses.registry import register_objective

MARGIN = 0.5


@register_objective
class ToyMarginObjective(Objective):
    """Margin ranking (m = 0.5) of each frame over the next on the temporal head's scores [B, k]."""

    name = "toy-margin"  # = the entry point's name in pyproject.toml

    def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
        """Mean hinge over the k-1 neighbouring pairs of each clip and over the clips; no target."""
        earlier, later = head_output[:, :-1], head_output[:, 1:]
        return F.margin_ranking_loss(earlier, later, torch.ones_like(earlier), margin=MARGIN)
