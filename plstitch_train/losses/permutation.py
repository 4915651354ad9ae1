"""The permutation-classification baseline of PL-Stitch's objective ablation: which shuffle was applied?

Each clip is shuffled by a random class p of its permutation set (all k! or a sampled set of N) and
`L = -log softmax(logits)[p]` (order prediction, Lee et al., ICCV 2017; Shuffle & Learn, Misra et al. 2016).
Numerics: `ranking.permutation_classification_loss`; shuffles: `plstitch_train.permutations`.
"""

from __future__ import annotations

from torch import Tensor, nn

from plstitch_train.config.loss import PERMUTATION_FACTS
from plstitch_train.heads import PermutationHead, temporal_head_size
from plstitch_train.losses.objective import Objective
from plstitch_train.losses.ranking import permutation_classification_loss
from plstitch_train.losses.registry import register_objective
from plstitch_train.permutations import apply_permutation, sample_permutation_indices

__all__ = ["PermutationObjective"]


@register_objective
class PermutationObjective(Objective):
    """Cross-entropy over the permutation classes of a shuffled clip, from the `PermutationHead`'s logits."""

    name = "permutation"
    head_name = "permutation_head"
    facts = PERMUTATION_FACTS  # permutation_head / permutation_classes; clip_len checked against the classes

    def build_head(self, dim: int) -> nn.Module:
        """The permutation classifier (`model.permutation_head`: linear, or the temporal head's trunk)."""
        model = self.config.model
        hidden, ff = temporal_head_size(model, dim)
        return PermutationHead(
            dim,
            self.config.sampling.clip_len,
            n_classes=self.config.loss.permutation_classes,
            kind=model.permutation_head,
            hidden_dim=hidden,
            n_layers=model.temporal_layers,
            n_heads=model.temporal_heads,
            ff_dim=ff,
            dropout=model.temporal_dropout,
        )

    def prepare(self, clip: Tensor) -> tuple[Tensor, Tensor | None]:
        """Shuffle each clip by a random class (0: of all k!; N: of the fixed sampled set); the class is the
        target."""
        batch, k = clip.shape[:2]
        n_classes = self.config.loss.permutation_classes
        perm_index = sample_permutation_indices(batch, k, device=clip.device, n_classes=n_classes)
        return apply_permutation(clip, perm_index, n_classes), perm_index

    def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
        """Cross-entropy of the class logits [B, P] against the applied shuffle's class [B]."""
        n_classes = self.config.loss.permutation_classes
        return permutation_classification_loss(head_output, target, n_classes=n_classes)
