"""The loss branches of PL-Stitch, one home for their names: `vid`, `mim`, `jigsaw`.

Why: the model, the live progress line, the gradient-scale probe, the run summary and the config's checks all
walk the branches; each reads this table instead of spelling the names. Torch-free, as the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plstitch_eval.errors import ConfigError

__all__ = ["BRANCHES", "BRANCH_NAMES", "LOSS_KEYS", "Branch", "branch", "branch_weights"]


@dataclass(frozen=True)
class Branch:
    """One loss branch: its key in the model's outputs, the `loss` setting weighting it, its display name."""

    name: str
    weight_field: str
    display: str


BRANCHES = (  # in forward order: the order the model computes them and every listing shows them
    Branch("vid", "lambda_vid", "L_vid"),
    Branch("mim", "lambda_mim", "L_MIM"),
    Branch("jigsaw", "lambda_jigsaw", "L_jigsaw"),
)
BRANCH_NAMES = tuple(entry.name for entry in BRANCHES)
LOSS_KEYS = ("loss", *BRANCH_NAMES)  # a step's logged losses: the weighted total, then each branch


def branch(name: str) -> Branch:
    """The branch called `name`; a one-line ConfigError naming the branches otherwise."""
    for entry in BRANCHES:
        if entry.name == name:
            return entry
    raise ConfigError(f"Unknown branch {name!r}; use one of {', '.join(BRANCH_NAMES)}.")


def branch_weights(loss: Any) -> dict[str, float]:
    """{branch: weight} of a `loss` section (a `LossConfig`: its `lambda_*`), every branch, in forward order.

    `loss` is not typed as `LossConfig`: that module imports this table, and the two would form a loop.
    """
    return {entry.name: getattr(loss, entry.weight_field) for entry in BRANCHES}
