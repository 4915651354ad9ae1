"""Dataset facts (printed name, metric family, background) live on the adapters, read by scoring and cards."""

from __future__ import annotations

import pytest

from plstitch_eval.data.datasets import DatasetAdapter, dataset_facts, list_datasets, registry
from plstitch_eval.metrics.scoring import COOKING_METRICS, SURGICAL_METRICS, background_ids, default_metrics
from plstitch_train.publishing.cards import _task_name, dataset_display_name


@pytest.mark.parametrize(
    ("name", "display", "family", "background"),
    [
        ("cholec80", "Cholec80", "surgical", ()),
        ("m2cai16", "M2CAI16", "surgical", ()),
        ("autolaparo", "AutoLaparo", "surgical", ()),
        ("gtea", "GTEA", "cooking", ("background",)),
        ("breakfast", "Breakfast", "cooking", ()),
        ("50salads", "50Salads", "cooking", ("action_start", "action_end")),
    ],
)
def test_known_datasets(name: str, display: str, family: str, background: tuple[str, ...]) -> None:
    facts = dataset_facts(name)
    assert (facts.display_name, facts.family, facts.background_classes) == (display, family, background)
    assert dataset_facts(name.upper()) == facts  # keys are case-insensitive
    assert default_metrics(name) == (COOKING_METRICS if family == "cooking" else SURGICAL_METRICS)
    assert dataset_display_name(name) == display


def test_unknown_names_pass_through_and_prefixes_keep_the_family() -> None:
    assert dataset_facts("my-videos") == registry.DatasetFacts("my-videos", "surgical")
    assert dataset_facts("gtea_split2").family == "cooking"
    assert dataset_facts(None).family == "surgical"


def test_every_registered_adapter_states_a_family() -> None:
    for name in list_datasets():
        assert dataset_facts(name).family in ("surgical", "cooking"), name


def test_a_new_adapter_is_all_scoring_and_cards_need(request: pytest.FixtureRequest) -> None:
    """Registering an adapter is enough: no second table in scoring or cards to update."""

    class Knitting(DatasetAdapter):
        name = "knitting"
        display_name = "Knitting-7"
        family = "cooking"
        class_names = ["idle", "knit", "purl"]
        background_classes = ["idle"]

    registry.register_dataset("knitting")(Knitting)
    request.addfinalizer(lambda: registry.unregister_dataset("knitting"))
    assert default_metrics("knitting") == COOKING_METRICS
    assert background_ids({"dataset": "knitting"}, Knitting.class_names) == [0]
    assert dataset_display_name("knitting") == "Knitting-7"
    assert _task_name("knitting") == "Temporal action segmentation"
    # the manifest's own background list wins over the adapter's
    assert background_ids({"dataset": "knitting", "background_classes": ["purl"]}, Knitting.class_names) == [
        2
    ]
