"""The `loss` section of a TrainConfig: the training objective - ranking objective, branch weights, jigsaw
ramp-in and the iBOT temperatures.

(The objective section; named `loss` on `TrainConfig` because `objective` is one of its settings.)
"""

from __future__ import annotations

from dataclasses import dataclass

from plstitch_train.config.section import Section, require
from plstitch_train.losses.sinkhorn import CENTERINGS

OBJECTIVES = ("pl", "pairwise", "permutation")


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

    def __post_init__(self) -> None:
        require(
            self.objective in OBJECTIVES,
            f"objective {self.objective!r} unknown; use one of {', '.join(OBJECTIVES)}.",
        )
        require(
            self.centering in CENTERINGS,
            f"centering {self.centering!r} unknown; use one of {', '.join(CENTERINGS)}.",
        )
        for name in ("lambda_vid", "lambda_mim", "lambda_jigsaw"):
            value = getattr(self, name)
            require(value >= 0, f"{name} must be >= 0, 0 disabling its branch (got {value}).")
        require(
            self.lambda_vid or self.lambda_mim or self.lambda_jigsaw,
            "All loss weights are 0 (lambda_vid, lambda_mim, lambda_jigsaw): enable at least one of "
            "--lambda-vid/-mim/-jigsaw.",
        )
