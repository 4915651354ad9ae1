"""The `loss` section of a TrainConfig: the training objective - ranking objective, branch weights, jigsaw
ramp-in and the iBOT temperatures.

(The objective section; named `loss` on `TrainConfig` because `objective` is one of its settings.)
"""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_train.config.section import Section, require
from plstitch_train.losses.sinkhorn import CENTERINGS

OBJECTIVES = ("pl", "pairwise", "permutation")
# the most classes of a sampled permutation set: 8!, every permutation of the longest full-set clip
# (the same as plstitch_train.permutations.MAX_PERMUTATION_CLASSES; this module stays free of torch)
MAX_PERMUTATION_CLASSES = 40320


@dataclass
class LossConfig(Section):
    """L_vid's objective, the weights of L_vid / L_MIM / L_jigsaw (0 disables a branch), iBOT temperatures."""

    NAME = "loss"

    objective: str = "pl"
    lambda_vid: float = 1.0
    lambda_mim: float = 1.0
    lambda_jigsaw: float = 0.4
    jigsaw_start_epoch: float = 6.0
    jigsaw_ramp_epochs: float = 1.0
    student_temp: float = 0.1
    teacher_temp: float = 0.04
    warmup_teacher_temp: float = 0.04
    teacher_patch_temp: float = 0.07
    warmup_teacher_patch_temp: float = 0.04
    warmup_teacher_temp_epochs: int = 3
    # iBOT's teacher targets: "center" (its EMA centre, as published) or "sinkhorn_knopp" (DINOv2's)
    centering: str = "center"
    # objective "permutation": 0 = every clip_len! permutation is a class (clip_len <= 8); N > 0 = a fixed
    # sampled set of N distinct permutations, identity included (plstitch_train.permutations.permutation_set)
    permutation_classes: int = 0

    def __post_init__(self) -> None:
        require(
            self.objective in OBJECTIVES,
            f"objective {self.objective!r} unknown; use one of {', '.join(OBJECTIVES)}.",
        )
        require(
            self.centering in CENTERINGS,
            f"centering {self.centering!r} unknown; use one of {', '.join(CENTERINGS)}.",
        )
        require(
            self.permutation_classes == 0 or 2 <= self.permutation_classes <= MAX_PERMUTATION_CLASSES,
            f"permutation_classes must be 0 (every clip_len! permutation) or 2..{MAX_PERMUTATION_CLASSES} "
            f"(a sampled set of that many permutations); got {self.permutation_classes}.",
        )
        for name in ("lambda_vid", "lambda_mim", "lambda_jigsaw"):
            value = getattr(self, name)
            require(value >= 0, f"{name} must be >= 0, 0 disabling its branch (got {value}).")
        require(
            self.lambda_vid or self.lambda_mim or self.lambda_jigsaw,
            "All loss weights are 0 (lambda_vid, lambda_mim, lambda_jigsaw): enable at least one of "
            "--lambda-vid/-mim/-jigsaw.",
        )
