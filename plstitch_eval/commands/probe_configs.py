"""The protocols' configs built from CLI values, once for all commands (knn, linear, cv, temporal, benchmark).

An option left unset (None) is dropped by `given()`, so the config dataclass's default wins - or `base`'s, the
config a `--config` file or `--set` items made (`protocols.settings.section_configs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from plstitch_eval.commands.options import given
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.temporal.fit import TemporalConfig
from plstitch_eval.utils.device import resolve_device

__all__ = ["knn_config", "linear_config", "resolved_device", "temporal_config"]


def resolved_device(device: str) -> str:
    """`auto` / `cuda` / ... as the device string the probes run on (e.g. `cpu`, `cuda:0`)."""
    return str(resolve_device(device))


def knn_config(
    k: int | None = None,
    temperature: float | None = None,
    weighting: str | None = None,
    device: str = "auto",
    chunk_size: int | None = None,
    threads: int | None = None,
    base: KnnConfig | None = None,
) -> KnnConfig:
    """A `KnnConfig` from the options given (None: `base`'s value, else KnnConfig's default), on the
    resolved device."""
    chosen = given(
        k=k, temperature=temperature, weighting=weighting, chunk_size=chunk_size, num_threads=threads
    )
    return _over(base, KnnConfig, chosen, device=resolved_device(device))


def linear_config(
    lr: Sequence[float] | None = None,
    wd: Sequence[float] | None = None,
    optimizer: str | None = None,
    epochs: int | None = None,
    batch_size: int | None = None,
    standardize: bool | None = None,
    balance: bool | None = None,
    select_metric: str | None = None,
    seed: int | None = None,
    device: str = "auto",
    base: LinearConfig | None = None,
) -> LinearConfig:
    """A `LinearConfig` from the options given (None or an empty grid: `base`'s value, else LinearConfig's
    default)."""
    chosen = given(
        lrs=tuple(lr) if lr else None,
        weight_decays=tuple(wd) if wd else None,
        optimizer=optimizer,
        epochs=epochs,
        batch_size=batch_size,
        standardize=standardize,
        balance_classes=balance,
        select_metric=select_metric,
        seed=seed,
    )
    return _over(base, LinearConfig, chosen, device=resolved_device(device))


def temporal_config(base: TemporalConfig | None = None, **options: Any) -> TemporalConfig:
    """A `TemporalConfig` from the options given (None = not given: `base`'s value, else the default)."""
    return _over(base, TemporalConfig, given(**options))


def _over(base: Any, kind: type, chosen: dict[str, Any], **fixed: Any) -> Any:
    """`kind(**chosen, **fixed)`, or `base` with those fields replaced when a base is given."""
    if base is None:
        return kind(**chosen, **fixed)
    return dataclasses.replace(base, **chosen, **fixed)
