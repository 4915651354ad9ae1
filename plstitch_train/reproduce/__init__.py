"""`plstitch reproduce` (CPU-scale reproduction of the paper's ablations): the package's public face.

Modules: `presets` (rows, presets, settings, folder layout), `run` (train -> evaluate -> tabulate),
`evaluation` (frozen evaluation, order measures, references, awareness), `jobs` (parallel runs), `tables`
and `stats` (mean +- std tables, paired comparisons). Library use: `reproduce(ReproduceConfig(...))`.
"""

from __future__ import annotations

import importlib
from typing import Any

from plstitch_train.reproduce.presets import (
    RANDOM_SHARED_INIT,
    REPRODUCE_PRESETS,
    ROWS,
    SYNTHETIC_EPOCHS,
    SYNTHETIC_TRAINING,
    AblationRow,
    ReproduceConfig,
    ReproduceLayout,
    ReproducePreset,
    get_reproduce_preset,
    run_name,
)

# Light on purpose: the CLI imports the presets through this package at start-up, so everything else (the run
# modules load the trainer and torch) is resolved on first use by the module `__getattr__` below (PEP 562).
_LAZY_HOMES = {
    "run": (
        "SCHEMA",
        "best_run",
        "ensure_random_init",
        "ensure_trained",
        "export_best",
        "refuse_other_presets_tables",
        "reproduce",
        "shared_init_dir",
        "shared_init_spec",
        "train_config",
    ),
    "evaluation": (
        "ensure_awareness",
        "ensure_evaluated",
        "ensure_gradient_scale",
        "ensure_order_measures",
        "ensure_references",
    ),
    "jobs": ("run_in_parallel", "training_seconds"),
    "stats": (
        "COMPARISONS",
        "awareness_comparison",
        "comparisons_markdown",
        "paired_comparisons",
        "per_seed_markdown",
    ),
    "tables": (
        "MAJORITY",
        "METRICS",
        "ORACLE_TIME",
        "PROTOCOLS",
        "RANDOM_INIT",
        "RAW_PIXELS",
        "SHARED_INIT",
        "aggregate",
        "markdown_tables",
        "mean_std",
        "shown_tables",
    ),
}
_LAZY = {name: f"{__name__}.{module}" for module, names in _LAZY_HOMES.items() for name in names}

__all__ = [  # the lazy names included: __getattr__ provides them
    "RANDOM_SHARED_INIT",
    "REPRODUCE_PRESETS",
    "ROWS",
    "SYNTHETIC_EPOCHS",
    "SYNTHETIC_TRAINING",
    "AblationRow",
    "ReproduceConfig",
    "ReproduceLayout",
    "ReproducePreset",
    "get_reproduce_preset",
    "run_name",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    """A lazy re-export (PEP 562): its home module is imported on first use, keeping CLI start-up light."""
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy re-exports included (for tab completion and `dir()`)."""
    return sorted({*globals(), *_LAZY})
