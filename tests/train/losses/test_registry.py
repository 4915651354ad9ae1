"""The objective registry: the built-ins under their config names, one-line errors naming the known ones,
duplicates refused, and each built-in objective's loss checked against a formula written out here."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor

from plstitch_eval.errors import ConfigError
from plstitch_eval.registry import SHIPPED_PACKAGE
from plstitch_train.config import OBJECTIVES, TrainConfig
from plstitch_train.config.loss import objective_choices
from plstitch_train.heads import PermutationHead, TemporalHead
from plstitch_train.losses import (
    Objective,
    PairwiseObjective,
    PermutationObjective,
    PlackettLuceObjective,
    get_objective,
    objective_names,
    register_objective,
    unregister_objective,
)
from plstitch_train.losses.registry import OBJECTIVE_REGISTRY
from plstitch_train.permutations import all_permutations


def test_the_builtins_are_registered_under_the_configs_names() -> None:
    shipped = [n for n in objective_names() if OBJECTIVE_REGISTRY.package(n) == SHIPPED_PACKAGE]
    assert tuple(shipped) == OBJECTIVES == ("pl", "pairwise", "permutation")  # plugins come after them
    assert [get_objective(name) for name in OBJECTIVES] == [
        PlackettLuceObjective,
        PairwiseObjective,
        PermutationObjective,
    ]


def test_an_unknown_name_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(ConfigError) as caught:
        get_objective("listnet")
    assert str(caught.value) == "Unknown --objective 'listnet'. Known: pl, pairwise, permutation."


def test_a_second_objective_of_a_taken_name_is_refused() -> None:
    class AnotherPL(Objective):
        name = "pl"

        def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
            return head_output.sum()

    with pytest.raises(ConfigError, match="Objective 'pl' is already registered, by package 'plstitch'"):
        register_objective(AnotherPL)
    assert get_objective("pl") is PlackettLuceObjective


def test_a_class_without_a_name_is_refused() -> None:
    class Nameless(Objective):
        def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
            return head_output.sum()

    with pytest.raises(ConfigError, match="has no `name`"):
        register_objective(Nameless)


def test_registering_extends_the_configs_choices_and_unregistering_undoes_it() -> None:
    class Extra(Objective):
        name = "extra-objective"

        def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
            return head_output.mean()

    register_objective(Extra)
    try:
        assert objective_names()[-1] == "extra-objective" and objective_choices()[-1] == "extra-objective"
        assert TrainConfig(objective="extra-objective").loss.objective == "extra-objective"
    finally:
        unregister_objective("extra-objective")
    assert objective_choices() == OBJECTIVES
    with pytest.raises(ConfigError, match="No objective 'extra-objective' is registered"):
        unregister_objective("extra-objective")
    with pytest.raises(ConfigError, match="objective 'extra-objective' unknown"):
        TrainConfig(objective="extra-objective")


def _naive_pl_per_item(scores: Tensor) -> float:
    """mean_b sum_i [log sum_{j>=i} exp(s_j) - s_i] / K, by loops in float64."""
    total = 0.0
    for row in scores.double().tolist():
        k = len(row)
        total += sum(math.log(sum(math.exp(s) for s in row[i:])) - row[i] for i in range(k)) / k
    return total / len(scores)


def _naive_pairwise(scores: Tensor) -> float:
    """mean_b mean_{i<j} max(0, 1 - (s_i - s_j)), by loops in float64."""
    per_clip = []
    for row in scores.double().tolist():
        pairs = [(row[i], row[j]) for i in range(len(row)) for j in range(i + 1, len(row))]
        per_clip.append(sum(max(0.0, 1.0 - (a - b)) for a, b in pairs) / len(pairs))
    return sum(per_clip) / len(per_clip)


@pytest.mark.parametrize(("name", "naive"), [("pl", _naive_pl_per_item), ("pairwise", _naive_pairwise)])
def test_the_score_objectives_take_the_temporal_head_and_compute_their_formula(name: str, naive) -> None:
    objective = get_objective(name)(TrainConfig(objective=name))
    assert objective.head_name == "temporal_head" and isinstance(objective.build_head(16), TemporalHead)
    clip = torch.randn(3, 5, 3, 8, 8)
    prepared, target = objective.prepare(clip)
    assert prepared is clip and target is None  # clips in true order, nothing to predict but the order
    scores = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    assert math.isclose(float(objective(scores, None)), naive(scores), rel_tol=1e-5)


def test_the_permutation_objective_shuffles_and_classifies_the_applied_shuffle() -> None:
    config = TrainConfig(objective="permutation", clip_len=4)
    objective = get_objective("permutation")(config)
    assert objective.head_name == "permutation_head"
    assert isinstance(objective.build_head(16), PermutationHead)
    clip = torch.arange(2 * 4, dtype=torch.float32).reshape(2, 4, 1, 1, 1).expand(2, 4, 3, 2, 2)
    torch.manual_seed(3)
    shuffled, target = objective.prepare(clip)
    perms = all_permutations(4)
    for b in range(2):  # position i shows frame perms[p, i]
        assert torch.equal(shuffled[b, :, 0, 0, 0], clip[b, perms[target[b]], 0, 0, 0])
    logits = torch.randn(2, 24, generator=torch.Generator().manual_seed(2))
    expected = -torch.log_softmax(logits.double(), dim=1)[torch.arange(2), target].mean()
    assert math.isclose(float(objective(logits, target)), float(expected), rel_tol=1e-6)
