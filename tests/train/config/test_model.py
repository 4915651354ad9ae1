"""`ModelConfig`: the heads' widths and counts and the MIM mask ratio checked on construction."""

from __future__ import annotations

import pytest

from plstitch_train.config import ModelConfig
from tests.train.config.checks import refused


def test_defaults_are_the_paper_vitb16() -> None:
    model = ModelConfig()
    assert (model.arch, model.img_size, model.model_args) == ("vit_base_patch16_224", 224, {})
    assert (model.temporal_dim, model.temporal_ff, model.jigsaw_heads) == (0, 0, 0)  # 0: auto
    assert model.permutation_head == "temporal"  # the permutation baseline gets the temporal head's trunk


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"temporal_dim": -1}, "temporal_dim"),
        ({"temporal_ff": -4}, "temporal_ff"),
        ({"temporal_layers": 0}, "temporal_layers"),
        ({"temporal_heads": 0}, "temporal_heads"),
        ({"jigsaw_heads": -1}, "jigsaw_heads"),
        ({"mask_ratio": 1.0}, "mask_ratio"),
        ({"mask_ratio": -0.1}, "mask_ratio"),
        ({"permutation_head": "mlp"}, "permutation_head"),
    ],
)
def test_bad_values_are_refused_naming_the_field(values: dict, field: str) -> None:
    refused(ModelConfig, field, **values)


def test_model_args_are_not_shared_between_instances() -> None:
    first, second = ModelConfig(), ModelConfig()
    first.model_args["depth"] = 2
    assert second.model_args == {}


def test_permutation_head_names_its_choices() -> None:
    message = refused(ModelConfig, "permutation_head", permutation_head="transformer")
    assert message == "permutation_head 'transformer' unknown; use one of temporal, linear."
    assert ModelConfig(permutation_head="linear").permutation_head == "linear"
