"""The `loss` section of a TrainConfig: the training objective - ranking objective, branch weights, jigsaw
ramp-in and the iBOT temperatures.

(The objective section; named `loss` on `TrainConfig` because `objective` is one of its settings.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from plstitch_train.config.branches import BRANCHES
from plstitch_train.config.permutation_limits import MAX_PERMUTATION_CLASSES, check_clip_len
from plstitch_train.config.section import Section, require

__all__ = [
    "CENTERINGS",
    "MAX_PERMUTATION_CLASSES",
    "OBJECTIVES",
    "OBJECTIVE_GROUP",
    "PERMUTATION_FACTS",
    "LossConfig",
    "ObjectiveFacts",
    "accept_objective",
    "forget_objective",
    "objective_choices",
    "objective_facts",
    "objective_only_settings",
]

# The built-in L_vid objectives, by name: each is a module of plstitch_train.losses that registers itself
# (losses/registry.py). Listed here too because those modules need torch and the config and the CLI's help
# do not; tests/train/losses/test_registry.py keeps the two equal.
OBJECTIVES = ("pl", "pairwise", "permutation")
CENTERINGS = ("center", "sinkhorn_knopp")  # iBOT's EMA centre | DINOv2's Sinkhorn-Knopp targets
_added_objectives: dict[str, None] = {}  # names registered since start-up (register_objective), in order


OBJECTIVE_GROUP = "plstitch.objectives"  # the entry-point group of objectives from other packages


@dataclass(frozen=True)
class ObjectiveFacts:
    """What the torch-free config knows of an objective: the settings only it reads (a run that trains
    another objective ignores them when comparing configs) and its own check of a whole `TrainConfig`.

    Why: an objective's facts belong to it (`Objective.facts`), but the config must not import torch, so the
    facts are plain data declared without torch and handed over when the objective registers."""

    settings: tuple[str, ...] = ()
    check: Callable[[Any], None] | None = None  # (TrainConfig) -> None; raises ConfigError


def _check_permutation(config: Any) -> None:
    """Every clip_len! order (<= 8 frames), or a sampled set of permutation_classes orders."""
    check_clip_len(config.sampling.clip_len, config.loss.permutation_classes)


PERMUTATION_FACTS = ObjectiveFacts(("permutation_head", "permutation_classes"), _check_permutation)
_FACTS: dict[str, ObjectiveFacts] = {"permutation": PERMUTATION_FACTS}  # the built-ins' (torch-free)


def objective_facts(name: str) -> ObjectiveFacts:
    """The facts of objective `name` (none declared: no settings of its own, no check)."""
    return _FACTS.get(name, ObjectiveFacts())


def objective_only_settings() -> set[str]:
    """Every setting that only some objective reads (the union of the objectives' `settings`)."""
    return {setting for facts in _FACTS.values() for setting in facts.settings}


def objective_choices() -> tuple[str, ...]:
    """The names `objective` takes: the built-ins, any objective registered since start-up, and the names
    installed packages declare under `plstitch.objectives` (read from their metadata: nothing is imported, so
    the config stays torch-free; the entry point's name is the objective's name)."""
    from importlib.metadata import entry_points

    declared = tuple(ep.name for ep in entry_points(group=OBJECTIVE_GROUP))
    return tuple(dict.fromkeys(OBJECTIVES + tuple(_added_objectives) + declared))


def accept_objective(name: str, facts: ObjectiveFacts | None = None) -> None:
    """Let `objective` take `name` and know its facts (called by `register_objective` with `cls.facts`)."""
    if name not in OBJECTIVES:
        _added_objectives[name] = None
    if facts is not None and facts.settings + ((facts.check,) if facts.check else ()):
        _FACTS[name] = facts


def forget_objective(name: str) -> None:
    """Undo `accept_objective` for a name registered at run time (built-in names stay)."""
    _added_objectives.pop(name, None)
    if name not in OBJECTIVES:
        _FACTS.pop(name, None)


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
        choices = objective_choices()
        require(
            self.objective in choices,
            f"objective {self.objective!r} unknown; use one of {', '.join(choices)}.",
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
        weight_fields = [entry.weight_field for entry in BRANCHES]
        for name in weight_fields:
            value = getattr(self, name)
            require(value >= 0, f"{name} must be >= 0, 0 disabling its branch (got {value}).")
        require(
            any(getattr(self, name) for name in weight_fields),
            "All loss weights are 0 (lambda_vid, lambda_mim, lambda_jigsaw): enable at least one of "
            "--lambda-vid/-mim/-jigsaw.",
        )
