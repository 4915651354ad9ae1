"""Training objectives, one file per family: `ranking` (PL, pairwise, permutation classification), `ibot`.

The permutation data operations live in `plstitch_train.permutations`; they are re-exported here so that
`from plstitch_train.losses import apply_permutation` keeps working.
"""

from plstitch_train.losses.ibot import IBOTLoss, teacher_temperature_schedule
from plstitch_train.losses.ranking import (
    pairwise_ranking_loss,
    permutation_classification_loss,
    permutation_logits_from_scores,
    pl_chance_level,
    pl_loss_per_item,
    plackett_luce_loss,
)
from plstitch_train.permutations import (
    MAX_PERMUTATION_CLIP_LEN,
    all_permutations,
    apply_permutation,
    sample_permutation_indices,
)

__all__ = [
    "MAX_PERMUTATION_CLIP_LEN",
    "IBOTLoss",
    "all_permutations",
    "apply_permutation",
    "pairwise_ranking_loss",
    "permutation_classification_loss",
    "permutation_logits_from_scores",
    "pl_chance_level",
    "pl_loss_per_item",
    "plackett_luce_loss",
    "sample_permutation_indices",
    "teacher_temperature_schedule",
]
