"""mean_std: the one mean +- sample-std rule of every multi-seed table, against the standard library.

paired_difference: against closed forms of the t distribution (1 and 2 degrees of freedom) and scipy's
paired t test. welch_difference: against Welch's formulas written out here and scipy's ttest_ind.
"""

from __future__ import annotations

import math
import statistics

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.stats import (
    mean_interval,
    mean_std,
    mean_std_by_key,
    paired_difference,
    welch_difference,
)


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


def t2_quantile(q: float) -> float:
    """Quantile of Student t with 2 degrees of freedom: CDF(t) = 1/2 + t / (2 sqrt(2 + t^2)), inverted."""
    return (2 * q - 1) / math.sqrt(2 * q * (1 - q))


def test_paired_difference_by_hand_two_dof() -> None:
    # differences [1, 2, 3]: mean 2, sample std 1, sem 1/sqrt(3), t = 2 sqrt(3)
    d = paired_difference([11.0, 12.0, 13.0], [10.0, 10.0, 10.0])
    assert d["n"] == 3 and d["confidence"] == 0.95
    assert d["mean"] == pytest.approx(2.0) and d["std"] == pytest.approx(1.0)
    assert d["sem"] == pytest.approx(1 / math.sqrt(3))
    assert d["t"] == pytest.approx(2 * math.sqrt(3))
    half = t2_quantile(0.975) / math.sqrt(3)
    assert t2_quantile(0.975) == pytest.approx(4.3027, abs=1e-4)  # the printed t table value
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((2 - half, 2 + half))
    t = 2 * math.sqrt(3)
    assert d["p_value"] == pytest.approx(1 - t / math.sqrt(2 + t * t))  # 2 (1 - CDF(t)), 2 dof
    # a 99 % interval: the 0.995 quantile, wider than the 95 % one; the p-value does not depend on it
    d99 = paired_difference([11.0, 12.0, 13.0], [10.0, 10.0, 10.0], confidence=0.99)
    assert d99["ci_high"] - d99["ci_low"] == pytest.approx(2 * t2_quantile(0.995) / math.sqrt(3))
    assert d99["ci_low"] < d["ci_low"] and d99["p_value"] == pytest.approx(d["p_value"])


def test_paired_difference_by_hand_one_dof() -> None:
    # differences [1, 3]: mean 2, std sqrt(2), sem 1; t with 1 dof is Cauchy: quantile tan(pi (q - 1/2))
    d = paired_difference([1.0, 5.0], [0.0, 2.0])
    assert d["std"] == pytest.approx(math.sqrt(2)) and d["sem"] == pytest.approx(1.0)
    half = math.tan(math.pi * 0.475)
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((2 - half, 2 + half))
    assert d["p_value"] == pytest.approx(1 - 2 * math.atan(2.0) / math.pi)
    assert paired_difference([0.0, 2.0], [1.0, 5.0])["mean"] == pytest.approx(-2.0)  # a - b, not b - a


def test_paired_difference_matches_scipy_ttest_rel() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    a = [71.3, 68.9, 74.2, 70.0, 69.4]
    b = [65.1, 66.0, 70.8, 64.2, 67.7]
    d = paired_difference(a, b)
    ref = scipy_stats.ttest_rel(a, b)
    assert d["t"] == pytest.approx(float(ref.statistic)) and d["p_value"] == pytest.approx(float(ref.pvalue))
    diffs = [x - y for x, y in zip(a, b, strict=True)]
    assert d["mean"] == pytest.approx(statistics.fmean(diffs))
    assert d["std"] == pytest.approx(statistics.stdev(diffs))
    if hasattr(ref, "confidence_interval"):
        ci = ref.confidence_interval(0.9)
        d90 = paired_difference(a, b, confidence=0.9)
        assert (d90["ci_low"], d90["ci_high"]) == pytest.approx((float(ci.low), float(ci.high)))
    # not independent samples: Welch's t on the same numbers gives another statistic
    assert d["t"] != pytest.approx(float(scipy_stats.ttest_ind(a, b, equal_var=False).statistic))


def test_paired_difference_one_pair_and_no_spread() -> None:
    one = paired_difference([3.5], [1.0])
    assert one["n"] == 1 and one["mean"] == 2.5
    assert all(one[k] is None for k in ("std", "sem", "ci_low", "ci_high", "t", "p_value"))
    flat = paired_difference([70.1, 72.3, 65.7], [60.1, 62.3, 55.7])  # 10 each, up to float rounding
    assert flat["mean"] == pytest.approx(10.0) and flat["std"] == 0.0 and flat["sem"] == 0.0
    assert flat["ci_low"] == flat["ci_high"] == flat["mean"] and flat["t"] is None and flat["p_value"] is None


def test_paired_difference_refuses_bad_input() -> None:
    with pytest.raises(ConfigError, match="got 3 a and 2 b values"):
        paired_difference([1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ConfigError, match="no pairs"):
        paired_difference([], [])
    with pytest.raises(ConfigError, match="not in \\(0, 1\\)"):
        paired_difference([1.0, 2.0], [0.0, 0.0], confidence=95)
    with pytest.raises(ConfigError, match="non-finite"):
        paired_difference([1.0, float("nan")], [0.0, 0.0])


def test_welch_difference_by_hand() -> None:
    a, b = [45.3, 40.6, 41.0, 38.9, 42.1], [34.3, 37.4, 37.6, 36.3, 37.4, 35.0]
    d = welch_difference(a, b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    assert d["mean"] == pytest.approx(statistics.fmean(a) - statistics.fmean(b))
    assert d["sem"] == pytest.approx(math.sqrt(va + vb)) and d["df"] == pytest.approx(df)
    assert (d["n_a"], d["n_b"]) == (5, 6)
    scipy_stats = pytest.importorskip("scipy.stats")
    ref = scipy_stats.ttest_ind(a, b, equal_var=False)
    assert d["t"] == pytest.approx(float(ref.statistic)) and d["p_value"] == pytest.approx(float(ref.pvalue))
    half = float(scipy_stats.t.ppf(0.975, df)) * math.sqrt(va + vb)
    assert (d["ci_low"], d["ci_high"]) == pytest.approx((d["mean"] - half, d["mean"] + half))
    assert d["ci_low"] < d["mean"] < d["ci_high"]


def test_welch_difference_small_samples_and_bad_input() -> None:
    one = welch_difference([3.0], [1.0, 2.0])
    assert one["mean"] == pytest.approx(1.5) and one["ci_low"] is None and one["t"] is None
    flat = welch_difference([2.0, 2.0], [1.0, 1.0])
    assert flat["mean"] == pytest.approx(1.0) and flat["sem"] is None
    with pytest.raises(ConfigError, match="both sides"):
        welch_difference([], [1.0])
    with pytest.raises(ConfigError, match="Confidence"):
        welch_difference([1.0, 2.0], [0.0, 1.0], confidence=1.5)
    with pytest.raises(ConfigError, match="non-finite"):
        welch_difference([1.0, float("inf")], [0.0, 1.0])


def test_mean_interval_matches_scipy_t_interval() -> None:
    from scipy import stats

    values = [60.0, 70.0, 55.0, 64.0]
    out = mean_interval(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=statistics.mean(values), scale=stats.sem(values))
    assert out["n"] == 4 and out["mean"] == pytest.approx(statistics.mean(values))
    assert (out["ci_low"], out["ci_high"]) == (pytest.approx(low), pytest.approx(high))
    assert mean_interval([42.0])["ci_low"] is None  # one video: the mean only
    with pytest.raises(ConfigError, match="no values"):
        mean_interval([])
