"""Save a multi-label task's chosen head (tools, triplets, cvs) as a probe that says what is present.

The probe folder is a phase probe's (`probes.folder`) plus a ``task`` block: the task's name, head
``multi-label``, its labels, their predict columns (``tool_<name>``, ``triplet_<name>``, ``cvs_<name>``), a
decision threshold per label (0.5: the protocol picks none) and the metric the head was chosen on with its
validation value. The head is the linear grid's chosen `LinearProbeHead` (kind ``linear``) or the
multi-label MS-TCN at its chosen epoch (kind ``temporal``, settings ``refine: sigmoid``); the sigmoid of its
outputs gives the probabilities the protocol scored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from plstitch_eval.linear_grid import LinearProbeResult
from plstitch_eval.probes.folder import save_linear_probe, save_probe
from plstitch_eval.probes.probe import MULTILABEL_HEAD
from plstitch_eval.protocols.multilabel import multilabel_spec, noun
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks.registry import Task
from plstitch_eval.temporal.fit import TemporalConfig
from plstitch_eval.temporal.multilabel import MultiLabelTCNResult

THRESHOLD = 0.5  # a label is present when its probability is above this (the protocol tunes none)


def label_columns(task: Task, names: list[str]) -> list[str]:
    """Each label's predict column: `<noun>_<name>` (``tool_Grasper``, ``triplet_...``, ``cvs_C1``)."""
    return [f"{noun(multilabel_spec(task))}_{name}" for name in names]


def task_block(task: Task, results: Mapping[str, Any], select_value: float, phases: list[str]):
    """The probe's ``task`` record: the labels, their columns and thresholds, what the head was chosen on
    (`select_value`: the task's select metric on the validation frames)."""
    names = [str(n) for n in results["class_names"]]
    return {
        "name": task.name,
        "head": MULTILABEL_HEAD,
        "labels": names,
        "columns": label_columns(task, names),
        "thresholds": [THRESHOLD] * len(names),
        "select_metric": task.select_metric,
        "select_value": select_value,
        "label_classes": phases,  # the store's phases: a case's labels, for a phase truth beside it
    }


def save_multilabel_probe(
    folder: str | os.PathLike,
    task: Task,
    features: str | os.PathLike,
    results: Mapping[str, Any],
    fitted: LinearProbeResult,
    overwrite: bool = False,
) -> Path:
    """Save what `fit_multilabel_linear` fitted as a ``linear`` probe of the task: settings = the results'
    ``protocol`` block, metrics = its test metrics."""
    block = task_block(task, results, fitted.val_scores[fitted.best_head], _phases(features))
    return save_linear_probe(folder, features, results, fitted, overwrite, task=block)


def save_temporal_multilabel_probe(
    folder: str | os.PathLike,
    task: Task,
    features: str | os.PathLike,
    results: Mapping[str, Any],
    fitted: MultiLabelTCNResult,
    config: TemporalConfig,
    overwrite: bool = False,
) -> Path:
    """Save what `fit_multilabel_temporal` fitted as a ``temporal`` probe of the task: settings = the
    config whole (with ``refine: sigmoid``, the multi-label MS-TCN's), metrics = the results' test metrics."""
    store = FeatureStore(features)
    select_value = fitted.val_scores[fitted.best_epoch - 1]
    block = task_block(task, results, select_value, _phases(features))
    settings = {**asdict(config), "refine": fitted.model.refine}
    names = results["class_names"]
    metrics = results["metrics"]
    return save_probe(
        folder, "temporal", fitted.model, store.manifest, names, settings, metrics, overwrite,
        store=store.root, task=block,
    )  # fmt: skip


def _phases(features: str | os.PathLike) -> list[str]:
    """The store's phase names: a multi-label probe's ``label_classes``."""
    return [str(c) for c in FeatureStore(features).manifest.get("class_names") or []]
