"""The regression tasks' cells of a benchmark (`--tasks anticipation,rsd`): each runs its task's head on its
pair's store at its seed (`protocols/regression.py`; cv: `protocols/regression_cv.py`), and its status line
gives the task's metrics in minutes. Their table sections and figure are `task_table.py`'s."""

from __future__ import annotations

import math
from typing import Any

from plstitch_eval.benchmark.cells import Cell
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.protocols import get_protocol
from plstitch_eval.protocols.registry import CV_TASK
from plstitch_eval.protocols.regression import (
    run_knn_regression,
    run_linear_regression,
    run_temporal_regression,
)
from plstitch_eval.protocols.regression_cv import run_regression_cv
from plstitch_eval.tasks import get_task

__all__ = ["format_minutes", "run_task_cell", "task_status"]

VALIDATED = {"linear": run_linear_regression, "temporal": run_temporal_regression}  # heads chosen on val


def run_task_cell(config: BenchmarkConfig, cell: Cell) -> dict[str, Any]:
    """The cell's results dict: its task's head (k-NN, linear, MS-TCN or cross-validated) on its store, with
    the protocol's settings at the cell's seed (`BenchmarkConfig.at_seed`)."""
    view = config.at_seed(cell.seed)
    task, settings, scheme = cell.task, config.task_settings, cell.dataset.split_scheme
    if cell.protocol == CV_TASK:
        inner = get_protocol(view.cv_protocol, "cv-protocol").config_of(view)
        return run_regression_cv(
            cell.store,
            task,
            settings,
            view.cv_protocol,
            inner,
            view.cv_folds,
            view.cv_seed,
            view.val_fraction,
        )
    if cell.protocol == "knn":
        return run_knn_regression(cell.store, task, settings, view.knn, scheme)
    run = VALIDATED[cell.protocol]
    return run(cell.store, task, settings, getattr(view, cell.protocol), scheme, view.val_fraction)


def format_minutes(value: Any, std: Any = None) -> str:
    """Minutes as the task tables show them (`0.123`, `0.123 ± 0.010`); `-` for none or not finite."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    if not isinstance(std, (int, float)) or not math.isfinite(std):
        return f"{value:.3f}"
    return f"{value:.3f} ± {std:.3f}"


def task_status(cell: Cell) -> str:
    """The numbers of a task cell's status line: its task's metrics that its results hold, in minutes."""
    metrics = [m for m in get_task(cell.task).metrics if m in cell.metrics]
    return ", ".join(f"{m} {format_minutes(cell.metrics.get(m))}" for m in metrics) + " (min)"
