"""The task cells of a benchmark (`--tasks anticipation,rsd,triplets,cvs,skill`): each runs its task's head
on its pair's store at its seed - a regression task's (`protocols/regression.py`; cv:
`protocols/regression_cv.py`), a multi-label task's linear probe (`protocols/multilabel.py`) or MS-TCN
(`protocols/temporal_multilabel.py`), skill's ridge (`protocols/skill.py`) - and its status line gives the
task's metrics (regression: in minutes). Their table sections and figure are `task_table.py`'s."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from plstitch_eval.benchmark.cells import Cell
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.task_kinds import SKILL_SCORE, multilabel_inner
from plstitch_eval.protocols import get_protocol
from plstitch_eval.protocols.multilabel import run_multilabel_linear
from plstitch_eval.protocols.multilabel_cv import run_multilabel_cv
from plstitch_eval.protocols.registry import CV_TASK
from plstitch_eval.protocols.regression import (
    run_knn_regression,
    run_linear_regression,
    run_temporal_regression,
)
from plstitch_eval.protocols.regression_cv import run_regression_cv
from plstitch_eval.protocols.skill import run_skill_cv, run_skill_linear
from plstitch_eval.protocols.temporal_multilabel import run_multilabel_temporal
from plstitch_eval.tasks import MULTI_LABEL, REGRESSION, get_task
from plstitch_eval.tasks.registry import VIDEO_REGRESSION

__all__ = ["format_number", "run_task_cell", "task_status"]

VALIDATED = {"linear": run_linear_regression, "temporal": run_temporal_regression}  # heads chosen on val


def run_task_cell(config: BenchmarkConfig, cell: Cell) -> dict[str, Any]:
    """The cell's results dict: its task's head (k-NN, linear, MS-TCN or cross-validated) on its store, with
    the protocol's settings at the cell's seed (`BenchmarkConfig.at_seed`). A multi-label task: the
    class-balanced linear probe, as `plstitch linear --task T`; skill: the ridge on the store's split (linear)
    or over `--skill-folds` (cv: K folds by video drawn with the seed, or LOUO / LOSO), as `plstitch
    linear|cv --task skill`. A store lacking the task's labels never gets here: the runner marks the cell
    n/a (`applicable.py`)."""
    view = config.at_seed(cell.seed)
    task, settings, scheme = cell.task, config.task_settings, cell.dataset.split_scheme
    head = get_task(task).head
    linear = dataclasses.replace(view.linear, balance_classes=True)  # a multi-label cell's linear probe
    if head == MULTI_LABEL and cell.protocol == CV_TASK:
        inner = multilabel_inner(view.cv_protocol)
        config = linear if inner == "linear" else view.temporal
        options = {"folds": view.cv_folds, "seed": view.cv_seed, "val_fraction": view.val_fraction}
        return run_multilabel_cv(task, cell.store, inner, config, **options)
    if head == MULTI_LABEL and cell.protocol == "temporal":
        return run_multilabel_temporal(task, cell.store, view.temporal, scheme, view.val_fraction)
    if head == MULTI_LABEL:
        return run_multilabel_linear(task, cell.store, linear, scheme, view.val_fraction)
    if head == VIDEO_REGRESSION:
        if cell.protocol == CV_TASK:
            return run_skill_cv(cell.store, str(view.skill_folds), SKILL_SCORE, view.cv_seed)
        return run_skill_linear(cell.store, SKILL_SCORE, scheme)
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


def format_number(value: Any, std: Any = None) -> str:
    """A task metric as the task tables show it (`0.123`, `0.123 ± 0.010`); `-` for none or not finite."""
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    if not isinstance(std, (int, float)) or not math.isfinite(std):
        return f"{value:.3f}"
    return f"{value:.3f} ± {std:.3f}"


def task_status(cell: Cell) -> str:
    """The numbers of a task cell's status line: its task's metrics that its results hold (regression: in
    minutes; triplets: the six mAPs; cvs: mAP, Brier, ...; skill: Spearman's rho and MAE)."""
    task = get_task(cell.task)
    metrics = [m for m in task.metrics if m in cell.metrics]
    numbers = ", ".join(f"{m} {format_number(cell.metrics.get(m))}" for m in metrics)
    return f"{numbers} (min)" if task.head == REGRESSION else numbers
