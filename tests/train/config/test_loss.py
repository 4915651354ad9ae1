"""`LossConfig` (the objective section): ranking objective and branch weights checked on construction."""

from __future__ import annotations

import pytest

from plstitch_train.config import OBJECTIVES, LossConfig
from tests.train.config.checks import refused


def test_defaults_are_the_paper_weights() -> None:
    loss = LossConfig()
    assert (loss.objective, loss.lambda_vid, loss.lambda_mim, loss.lambda_jigsaw) == ("pl", 1.0, 1.0, 0.4)
    assert OBJECTIVES == ("pl", "pairwise", "permutation")
    assert loss.permutation_classes == 0  # every clip_len! permutation


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"objective": "listnet"}, "objective"),
        ({"lambda_vid": -1.0}, "lambda_vid"),
        ({"lambda_mim": -0.5}, "lambda_mim"),
        ({"lambda_jigsaw": -0.1}, "lambda_jigsaw"),
        ({"permutation_classes": -1}, "permutation_classes"),
        ({"permutation_classes": 1}, "permutation_classes"),
        ({"permutation_classes": 40321}, "permutation_classes"),
    ],
)
def test_bad_values_are_refused_naming_the_field(values: dict, field: str) -> None:
    refused(LossConfig, field, **values)


def test_at_least_one_branch_stays_on() -> None:
    message = refused(LossConfig, "lambda_vid", lambda_vid=0.0, lambda_mim=0.0, lambda_jigsaw=0.0)
    assert "All loss weights are 0" in message
    assert LossConfig(lambda_vid=0.0, lambda_mim=0.0).lambda_jigsaw == 0.4  # one branch is enough


def test_permutation_classes_says_what_it_takes() -> None:
    message = refused(LossConfig, "permutation_classes", permutation_classes=1)
    assert message == (
        "permutation_classes must be 0 (every clip_len! permutation) or 2..40320 (a sampled set of that many "
        "permutations); got 1."
    )
    assert LossConfig(permutation_classes=2).permutation_classes == 2
    assert LossConfig(permutation_classes=40320).permutation_classes == 40320


def test_the_class_cap_is_the_permutation_modules() -> None:
    from plstitch_train.config.loss import MAX_PERMUTATION_CLASSES
    from plstitch_train.permutations import MAX_PERMUTATION_CLASSES as TORCH_SIDE

    assert MAX_PERMUTATION_CLASSES == TORCH_SIDE == 40320
