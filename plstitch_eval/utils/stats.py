"""Mean and sample standard deviation over runs (seeds), the one rule every table of several runs uses.

And the difference of two rows with its Student t interval: paired over the same seeds, or of two independent
samples (Welch); and a mean's own interval (`mean_interval`: a metric over test videos).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError


def mean_std(values: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample std (ddof=1) of numbers; std is None for a single value (a spread needs two)."""
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), (float(array.std(ddof=1)) if len(array) > 1 else None)


def mean_std_by_key(records: Sequence[Mapping[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Per key of the first record: mean and sample std over the records (NaN std for one record)."""
    pairs = {key: mean_std([record[key] for record in records]) for key in records[0]}
    mean = {key: m for key, (m, _) in pairs.items()}
    std = {key: float("nan") if s is None else s for key, (_, s) in pairs.items()}
    return mean, std


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"Confidence {confidence!r} is not in (0, 1); use e.g. 0.95 for a 95 % interval.")


def _t_interval(mean: float, sem: float, df: float, confidence: float) -> dict[str, float]:
    """Two-sided Student t interval, statistic and p-value of `mean` with standard error `sem`."""
    from scipy.stats import t as student_t  # scipy comes with scikit-learn; imported here to keep this light

    half = float(student_t.ppf(0.5 + confidence / 2.0, df)) * sem
    t_stat = mean / sem
    return {
        "ci_low": mean - half,
        "ci_high": mean + half,
        "t": float(t_stat),
        "p_value": float(2.0 * student_t.sf(abs(t_stat), df)),
    }


def paired_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """Mean of the paired differences `a_i - b_i` with a Student t interval (n - 1 degrees of freedom).

    Returns n, mean, std (ddof=1), sem, ci_low, ci_high, t, p_value (two-sided, H0: mean difference 0) and
    confidence. One pair gives the mean only (std, sem, interval, t and p are None); differences that are all
    equal give std 0, the interval (mean, mean) and no t or p.
    """
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if len(x) != len(y):
        raise ConfigError(f"Paired difference needs one b per a: got {len(x)} a and {len(y)} b values.")
    if len(x) == 0:
        raise ConfigError("Paired difference of no pairs: give at least one (a, b) pair.")
    _check_confidence(confidence)
    d = x - y
    if not np.isfinite(d).all():
        raise ConfigError(f"Paired difference of non-finite values (a - b = {d.tolist()}).")
    n, mean = len(d), float(d.mean())
    out: dict[str, Any] = {"n": n, "mean": mean, "std": None, "sem": None, "ci_low": None, "ci_high": None}
    out.update({"t": None, "p_value": None, "confidence": confidence})
    if n == 1:
        return out
    if np.ptp(d) <= 1e-12 * max(np.abs(x).max(), np.abs(y).max()):  # no spread, up to rounding of a - b
        out.update({"std": 0.0, "sem": 0.0, "ci_low": mean, "ci_high": mean})
        return out
    std = float(d.std(ddof=1))
    sem = std / float(np.sqrt(n))
    out.update({"std": std, "sem": sem, **_t_interval(mean, sem, n - 1, confidence)})
    return out


def welch_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """Difference of means `mean(a) - mean(b)` of two independent samples, with Welch's t interval.

    Why: a row trained from the shared initialisation and the random-init reference of the same seed share
    nothing but the seed number, so pairing them by seed would be arbitrary. Degrees of freedom by the
    Welch-Satterthwaite rule. Returns n_a, n_b, mean, sem, df, ci_low, ci_high, t, p_value (two-sided) and
    confidence; with fewer than two values on a side, or no spread on both, only the mean (the rest None).
    """
    x = np.asarray(a, dtype=np.float64).ravel()
    y = np.asarray(b, dtype=np.float64).ravel()
    if len(x) == 0 or len(y) == 0:
        raise ConfigError(f"Difference of means needs values on both sides: got {len(x)} a and {len(y)} b.")
    _check_confidence(confidence)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ConfigError(f"Difference of means of non-finite values (a = {x.tolist()}, b = {y.tolist()}).")
    mean = float(x.mean() - y.mean())
    out: dict[str, Any] = {"n_a": len(x), "n_b": len(y), "mean": mean, "sem": None, "df": None}
    out.update({"ci_low": None, "ci_high": None, "t": None, "p_value": None, "confidence": confidence})
    if len(x) < 2 or len(y) < 2:
        return out
    var_a, var_b = float(x.var(ddof=1)) / len(x), float(y.var(ddof=1)) / len(y)
    if var_a + var_b == 0.0:
        return out
    sem = float(np.sqrt(var_a + var_b))
    df = (var_a + var_b) ** 2 / (var_a**2 / (len(x) - 1) + var_b**2 / (len(y) - 1))
    out.update({"sem": sem, "df": float(df), **_t_interval(mean, sem, df, confidence)})
    return out


def mean_interval(values: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """Mean of `values` (e.g. one metric per test video) with its Student t interval (n - 1 degrees of
    freedom): n, mean, std, sem, ci_low, ci_high, confidence; `paired_difference`'s rules against zero (one
    value: the mean only)."""
    if len(values) == 0:
        raise ConfigError("A mean of no values: give at least one (e.g. one score per video).")
    out = paired_difference(values, [0.0] * len(values), confidence)
    return {key: out[key] for key in ("n", "mean", "std", "sem", "ci_low", "ci_high", "confidence")}
