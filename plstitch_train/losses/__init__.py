"""Training objectives: the L_vid objectives, one module each, looked up by name (`registry`), and `ibot`.

Built-in L_vid objectives: `plackett_luce` ("pl"), `pairwise`, `permutation`; their numerics live in
`ranking` (tested against the authors' code). Importing this package registers them. The permutation data
operations live in `plstitch_train.permutations`; they are re-exported here so that
`from plstitch_train.losses import apply_permutation` keeps working.
"""

from plstitch_train.losses.ibot import IBOTLoss, teacher_temperature_schedule
from plstitch_train.losses.objective import Objective
from plstitch_train.losses.pairwise import PairwiseObjective
from plstitch_train.losses.permutation import PermutationObjective
from plstitch_train.losses.plackett_luce import PlackettLuceObjective
from plstitch_train.losses.ranking import (
    pairwise_ranking_loss,
    permutation_classification_loss,
    permutation_logits_from_scores,
    pl_chance_level,
    pl_loss_per_item,
    plackett_luce_loss,
)
from plstitch_train.losses.registry import (
    get_objective,
    objective_names,
    register_objective,
    unregister_objective,
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
    "Objective",
    "PairwiseObjective",
    "PermutationObjective",
    "PlackettLuceObjective",
    "all_permutations",
    "apply_permutation",
    "get_objective",
    "objective_names",
    "pairwise_ranking_loss",
    "permutation_classification_loss",
    "permutation_logits_from_scores",
    "pl_chance_level",
    "pl_loss_per_item",
    "plackett_luce_loss",
    "register_objective",
    "sample_permutation_indices",
    "teacher_temperature_schedule",
    "unregister_objective",
]
