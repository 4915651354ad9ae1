"""Evaluation protocols on a feature store, one module each, each registering a `Protocol` (``registry``).

k-NN (``knn``), the majority reference (``majority``), the linear probe (``linear``), the MS-TCN
(``temporal``), tool presence (``tools``) and k-fold CV by video of any of them that has a fold fit (``cv``).
Each protocol returns a ``plstitch.results/v1`` dict (``plstitch_eval.results_json``, docs/results-json.md).
The shipped protocols register on the registry's first use; this face keeps the names that
``plstitch_eval.protocols`` held when it was one module (splits, scoring, results, scored files).
"""

from __future__ import annotations

import importlib
from typing import Any

# the names this face hands on, by the module that defines them; loaded on first use (PEP 562), so importing
# one protocol module (`plstitch score`'s prediction files) does not load every protocol (torch, scikit-learn:
# +2-3 s start-up measured). The shipped protocols register on the registry's first use (`load_shipped`).
_HOMES = {
    "plstitch_eval.protocols.knn": ("run_knn",),
    "plstitch_eval.protocols.majority": ("run_majority",),
    "plstitch_eval.protocols.linear": ("fit_linear_protocol", "run_linear"),
    "plstitch_eval.protocols.temporal": ("run_temporal", "run_temporal_seeds"),
    "plstitch_eval.protocols.cv": ("run_cv",),
    "plstitch_eval.protocols.tools": ("TOOLS_TASK", "run_tool_linear"),
    "plstitch_eval.metrics.scoring": (
        "COOKING_METRICS",
        "SURGICAL_METRICS",
        "background_ids",
        "default_metrics",
        "score_videos",
        "with_relaxed",
    ),
    "plstitch_eval.protocols.data": (
        "check_labels",
        "check_video",
        "load_train_val_test",
        "load_videos",
        "require_two_classes",
        "stack_labelled",
        "store_context",
        "store_relaxed_spec",
        "used_ks",
    ),
    "plstitch_eval.protocols.prediction_files": (
        "MSTCN_HEADER",
        "read_label_file",
        "read_mapping",
        "score_files",
        "video_key",
    ),
    "plstitch_eval.protocols.registry": (
        "RUNTIME_FIELDS",
        "TASK_LABELS",
        "TASK_TITLES",
        "CvFit",
        "Fold",
        "Protocol",
        "benchmark_protocols",
        "cv_protocols",
        "get_protocol",
        "protocol_names",
        "register_protocol",
        "registered_protocols",
        "task_card_detail",
        "task_label",
        "task_title",
        "unregister_protocol",
    ),
    "plstitch_eval.results_json": ("SCHEMA", "build_results", "write_results"),
    "plstitch_eval.splits": ("holdout_by_video", "kfold_by_video", "resolve_splits"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of `__all__` from its module, imported on first use; `CV_PROTOCOLS` asks the registry."""
    if name == "CV_PROTOCOLS":  # what `plstitch cv --protocol` cross-validates (the shipped ones)
        return importlib.import_module("plstitch_eval.protocols.registry").cv_protocols()
    module = _HOME_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [  # the protocols and their registry, and the names this module held before it became a package
    "COOKING_METRICS",
    "CV_PROTOCOLS",
    "MSTCN_HEADER",
    "RUNTIME_FIELDS",
    "SCHEMA",
    "SURGICAL_METRICS",
    "TASK_LABELS",
    "TASK_TITLES",
    "TOOLS_TASK",
    "CvFit",
    "Fold",
    "Protocol",
    "background_ids",
    "benchmark_protocols",
    "build_results",
    "check_labels",
    "check_video",
    "cv_protocols",
    "default_metrics",
    "fit_linear_protocol",
    "get_protocol",
    "holdout_by_video",
    "kfold_by_video",
    "load_train_val_test",
    "load_videos",
    "protocol_names",
    "read_label_file",
    "read_mapping",
    "register_protocol",
    "registered_protocols",
    "require_two_classes",
    "resolve_splits",
    "run_cv",
    "run_knn",
    "run_linear",
    "run_majority",
    "run_temporal",
    "run_temporal_seeds",
    "run_tool_linear",
    "score_files",
    "score_videos",
    "stack_labelled",
    "store_context",
    "store_relaxed_spec",
    "task_card_detail",
    "task_label",
    "task_title",
    "unregister_protocol",
    "used_ks",
    "video_key",
    "with_relaxed",
    "write_results",
]
