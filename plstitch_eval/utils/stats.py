"""Mean and sample standard deviation over runs (seeds), the one rule every table of several runs uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


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
