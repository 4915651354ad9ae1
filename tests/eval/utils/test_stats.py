"""mean_std: the one mean +- sample-std rule of every multi-seed table, against the standard library."""

from __future__ import annotations

import math
import statistics

from plstitch_eval.utils.stats import mean_std, mean_std_by_key


def test_mean_and_sample_std_match_statistics() -> None:
    values = [61.2, 64.8, 59.9, 67.3]
    mean, std = mean_std(values)
    assert math.isclose(mean, statistics.fmean(values))
    assert math.isclose(std, statistics.stdev(values))  # ddof=1, not the population std


def test_one_value_has_no_spread() -> None:
    assert mean_std([5.0]) == (5.0, None)
    mean, std = mean_std_by_key([{"accuracy": 70.0}])
    assert mean == {"accuracy": 70.0} and math.isnan(std["accuracy"])


def test_by_key_over_runs() -> None:
    runs = [
        {"accuracy": 60.0, "edit": 10.0},
        {"accuracy": 70.0, "edit": 30.0},
        {"accuracy": 65.0, "edit": 20.0},
    ]
    mean, std = mean_std_by_key(runs)
    assert mean == {"accuracy": 65.0, "edit": 20.0}
    assert math.isclose(std["accuracy"], statistics.stdev([60.0, 70.0, 65.0]))
    assert math.isclose(std["edit"], 10.0)
