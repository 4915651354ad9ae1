"""Save a regression protocol's fitted head (linear or temporal) as a probe that gives minutes.

The probe folder is a phase probe's (`probes.folder`) plus a ``task`` block: the task's name, its outputs
and their predict columns (``remaining_min``, ``next_<class>_min``), its settings (horizon, anticipated
groups, the elapsed input) and bounds. The head is a `RegressionHead`: the fitted head's outputs times the
target scale, clipped to the bounds - the numbers the protocol scored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from plstitch_eval.errors import ConfigError
from plstitch_eval.probes.folder import save_probe
from plstitch_eval.probes.kinds import LinearProbeHead, RegressionHead, TemporalProbeHead
from plstitch_eval.protocols.regression import TaskData
from plstitch_eval.store.features import FeatureStore

SAVED_HEADS = ("linear", "temporal")  # k-NN keeps its memory bank, not a head: nothing to save


def task_block(data: TaskData, scale: float) -> dict[str, Any]:
    """The probe's ``task`` record: what the outputs are, their columns, the settings and bounds."""
    spec = data.task.regression
    assert spec is not None
    columns = [spec.column(name) for name in data.outputs]
    if len(set(columns)) != len(columns):
        clash = sorted({c for c in columns if columns.count(c) > 1})[0]
        raise ConfigError(
            f"task {data.task.name}: two outputs share the predict column {clash!r} (a phase and a tool of "
            "one name?); anticipate one group (--anticipate phases or tools) to save a probe."
        )
    low, high = spec.bounds(data.info, data.settings)
    return {
        "name": data.task.name,
        "head": "regression",
        "outputs": list(data.outputs),
        "columns": columns,
        **data.settings.record(),
        "bounds": [low, high],
        "label_classes": list(data.info.class_names),  # the store's phases: a case's labels, for its truth
        "target_scale_min": float(scale),
        "unit": "minutes",
    }


def regression_head(head: str, fitted: Any, data: TaskData, scale: float) -> RegressionHead:
    """The probe head of a fitted linear regressor (`LinearRegressor`) or temporal regression fit."""
    assert data.task.regression is not None
    low, high = data.task.regression.bounds(data.info, data.settings)
    inner: nn.Module = (
        LinearProbeHead.from_result(fitted) if head == "linear" else TemporalProbeHead(fitted.model)
    )
    return RegressionHead(inner, scale, low, high, 1 if data.settings.elapsed else 0)


def save_regression_probe(
    folder: str | os.PathLike,
    features: str | os.PathLike,
    results: Mapping[str, Any],
    fitted: Any,
    data: TaskData,
    overwrite: bool = False,
) -> Path:
    """Save what `regression.fit_validated` fitted (results, fit, task data) as a ``linear`` / ``temporal``
    probe of the task: settings = the results' ``protocol`` block, metrics = its test metrics."""
    head = results["protocol"]["head"]
    if head not in SAVED_HEADS:
        raise ConfigError(f"--save keeps a linear or temporal head; {head} has none to save.")
    scale = float(results["protocol"]["target_scale_min"])
    module = regression_head(head, fitted, data, scale)
    settings = dict(results["protocol"])
    if head == "temporal":
        settings["refine"] = "sigmoid"  # the regression MS-TCN's later stages refine sigmoid outputs
    store = FeatureStore(features)
    return save_probe(
        folder,
        head,
        module,
        store.manifest,
        data.outputs,
        settings,
        results["metrics"],
        overwrite,
        store=store.root,
        task=task_block(data, scale),
    )
