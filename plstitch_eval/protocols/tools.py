"""Tool presence on frozen features (Cholec80's second task): the `tools` task's multi-label linear probe,
scored by per-tool average precision and their mean (mAP), as SelfSupSurg, LEMON and SurgeNet report it.

The probe is the generic multi-label one (`protocols/multilabel.py`: one class-balanced logistic per tool,
the phase probe's grid, the head of best validation mAP reported on the test frames, pooled over videos); the
tools' AP is `tasks/tools.py`'s. This module keeps the tool names of that code and registers the protocol a
benchmark cell runs (`linear-tools`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols.fractions import TrainFraction, fraction_of
from plstitch_eval.protocols.multilabel import (  # noqa: F401 - the tool probe's names, as before
    annotated_rows,
    multilabel_grad,
    multilabel_spec,
    pooled,
    positive_weights,
    run_multilabel_linear,
    shown_classes,
    sigmoid,
    train_multilabel_grid,
)
from plstitch_eval.protocols.registry import Protocol, numbers_only, register_protocol
from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.tasks.tools import MAP, TASK, ap_key, average_precisions, mean_ap  # noqa: F401

TOOLS_TASK = "linear-tools"  # the results task of tool presence (multi-label linear probe, AP / mAP)


def tool_frames(items: list[VideoFeatures]) -> tuple[np.ndarray, np.ndarray]:
    """(features [N, D], targets [N, K]) of the frames whose tool row is fully annotated (no -1)."""
    return pooled(annotated_rows(items, lambda item: item.tools))


def tool_classes(tools: list[str]) -> Callable[[VideoFeatures], list[str]]:
    """The tools a video shows in some annotated frame, by name: what a training subset must cover."""
    return shown_classes(tools, multilabel_spec(TASK))


def run_tool_linear(
    features: str | Path,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """Tool-presence protocol: the grid on train, the head of best validation mAP, AP per tool on test.

    `progress`: the grid's bar on stderr (`plstitch linear --task tools`; a benchmark cell runs without).
    `train_fraction`: the grid on subsets of the training videos, one per seed (protocols/fractions.py);
    a subset covers the tools (a tool counts in a video with a frame showing it) as a phase subset the phases.
    """
    return run_multilabel_linear(TASK, features, config, scheme, val_fraction, progress, train_fraction)


def _benchmark_run(store: str | Path, config: Any, scheme: str | None) -> dict[str, Any]:
    balanced = replace(config.linear, balance_classes=True)
    return run_tool_linear(
        store, balanced, scheme=scheme, val_fraction=config.val_fraction, train_fraction=fraction_of(config)
    )


def _settings(config: Any) -> dict[str, Any]:  # the linear grid, class-balanced per tool, chosen on mAP
    return {
        "linear": {**numbers_only(config.linear), "balance_classes": True, "select_metric": MAP},
        "val_fraction": config.val_fraction,
    }


PROTOCOL = register_protocol(
    Protocol(
        name=TOOLS_TASK,
        label="linear (tools)",
        title="Tool presence (linear probe, AP)",
        config_type=LinearConfig,
        section="linear",
        run=_benchmark_run,
        settings=_settings,
        table_metrics=lambda _phase_metrics: (MAP,),  # its results have no phase metrics
        chooses=("chosen_lr", "chosen_weight_decay"),
    )
)
