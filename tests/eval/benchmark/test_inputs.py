"""The comma lists of `plstitch benchmark`: `--protocols` and `--metrics` checked against their choices, and
the splitter they share refusing an empty item."""

from __future__ import annotations

import pytest

from plstitch_eval.benchmark.inputs import (
    PROTOCOL_LABELS,
    PROTOCOLS,
    parse_metrics,
    parse_protocols,
    split_items,
)
from plstitch_eval.errors import ConfigError


def test_protocols() -> None:
    with pytest.raises(ConfigError, match="Unknown protocol 'lin'.*knn, linear, temporal, cv"):
        parse_protocols("knn,lin")
    assert parse_protocols("linear,knn,cv") == ("linear", "knn", "cv")
    assert parse_protocols(["knn", "linear,knn"]) == ("knn", "linear")
    assert {p for p in PROTOCOLS if p != "cv"} <= set(PROTOCOL_LABELS)  # each has its table label


def test_metrics() -> None:
    assert parse_metrics(None) is None and parse_metrics(" ") is None  # each dataset's headline metrics
    assert parse_metrics("accuracy, macro_f1_video,accuracy") == ("accuracy", "macro_f1_video")
    with pytest.raises(ConfigError, match="Unknown metric 'acc' in --metrics; choose from accuracy"):
        parse_metrics("acc")


@pytest.mark.parametrize("value", ["a,,b", "", ",", ["a", ""]])
def test_an_empty_item_is_refused_naming_the_option(value: str | list[str]) -> None:
    with pytest.raises(ConfigError, match="^--models has an empty item"):
        split_items(value, "--models")
    assert split_items(" a , b ", "--models") == ["a", "b"]
