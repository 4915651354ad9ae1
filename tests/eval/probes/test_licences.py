"""A published probe's licence is the most restrictive of its backbone's and its dataset's."""

from __future__ import annotations

import pytest

from plstitch_eval.data.datasets import dataset_facts
from plstitch_eval.probes.licences import NO_WEIGHTS, LicenceSource, licence_id, strictest_licence


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("MIT", "mit"),
        ("Apache-2.0", "apache-2.0"),
        ("CC-BY-NC-SA-4.0", "cc-by-nc-sa-4.0"),
        ("cc-by-nc-4.0", "cc-by-nc-4.0"),
        ("DINOv3 License", "other"),
        ("unknown", "unknown"),
        ("", "unknown"),
    ],
)
def test_licence_ids(text: str, expected: str) -> None:
    assert licence_id(text) == expected


def _strictest(backbone: str, dataset: str) -> tuple[str, str | None]:
    chosen = strictest_licence([LicenceSource("backbone", backbone), LicenceSource("dataset", dataset)])
    return chosen.license, chosen.license_name


@pytest.mark.parametrize(
    ("backbone", "dataset", "expected"),
    [
        ("MIT", "MIT", "mit"),
        ("Apache-2.0", "CC-BY-NC-SA-4.0", "cc-by-nc-sa-4.0"),  # the dataset's terms bind the head
        ("CC-BY-NC-4.0", "MIT", "cc-by-nc-4.0"),  # and the backbone's
        ("CC-BY-NC-4.0", "CC-BY-NC-SA-4.0", "cc-by-nc-sa-4.0"),  # share-alike on top of non-commercial
        ("CC-BY-NC-SA-4.0", "unknown", "unknown"),  # unstated terms: nothing freer can be claimed
        (NO_WEIGHTS, "CC-BY-NC-SA-4.0", "cc-by-nc-sa-4.0"),  # a built-in encoder binds nothing
    ],
)
def test_the_most_restrictive_licence_wins(backbone: str, dataset: str, expected: str) -> None:
    assert _strictest(backbone, dataset)[0] == expected


def test_a_custom_licence_is_other_and_named() -> None:
    assert _strictest("DINOv3 License", "CC-BY-NC-SA-4.0") == ("other", "dinov3-license")
    assert _strictest("DINOv3 License", "Custom Data Terms") == (
        "other",
        "custom-data-terms-and-dinov3-license",
    )
    assert _strictest("MIT", "Apache-2.0") == ("apache-2.0", None)  # within a class: the one asking more


def test_dataset_licence_facts() -> None:
    assert dataset_facts("cholec80").license == "CC-BY-NC-SA-4.0" and dataset_facts("cholec80").license_source
    assert dataset_facts("synthetic").license == "MIT"
    assert dataset_facts("my-videos").license == "unknown"
