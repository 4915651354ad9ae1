"""Evaluation protocols on a feature store, one module each, each registering a `Protocol` (``registry``).

k-NN (``knn``), the majority reference (``majority``), the linear probe (``linear``), the MS-TCN
(``temporal``), tool presence (``tools``) and k-fold CV by video of any of them that has a fold fit (``cv``).
Each protocol returns a ``plstitch.results/v1`` dict (``plstitch_eval.results_json``, docs/results-json.md).
This face registers the shipped protocols (importing it is enough) and keeps the names that
``plstitch_eval.protocols`` held when it was one module (splits, scoring, results, scored files).
"""

# isort: off
# the shipped protocols, imported (so registered) in the order the CLI lists them
from plstitch_eval.protocols.knn import run_knn
from plstitch_eval.protocols.majority import run_majority
from plstitch_eval.protocols.linear import fit_linear_protocol, run_linear
from plstitch_eval.protocols.temporal import run_temporal, run_temporal_seeds
from plstitch_eval.protocols.cv import run_cv
from plstitch_eval.protocols.tools import TOOLS_TASK, run_tool_linear

# isort: on
from plstitch_eval.metrics.scoring import (
    COOKING_METRICS,
    SURGICAL_METRICS,
    background_ids,
    default_metrics,
    score_videos,
    with_relaxed,
)
from plstitch_eval.protocols.data import (
    check_labels,
    check_video,
    load_train_val_test,
    load_videos,
    require_two_classes,
    stack_labelled,
    store_context,
    store_relaxed_spec,
    used_ks,
)
from plstitch_eval.protocols.prediction_files import (
    MSTCN_HEADER,
    read_label_file,
    read_mapping,
    score_files,
    video_key,
)
from plstitch_eval.protocols.registry import (
    RUNTIME_FIELDS,
    TASK_LABELS,
    TASK_TITLES,
    CvFit,
    Fold,
    Protocol,
    benchmark_protocols,
    cv_protocols,
    get_protocol,
    protocol_names,
    register_protocol,
    registered_protocols,
    task_label,
    task_title,
    unregister_protocol,
)
from plstitch_eval.results_json import SCHEMA, build_results, write_results
from plstitch_eval.splits import holdout_by_video, kfold_by_video, resolve_splits

CV_PROTOCOLS = cv_protocols()  # what `plstitch cv --protocol` cross-validates (the shipped ones)

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
    "task_label",
    "task_title",
    "unregister_protocol",
    "used_ks",
    "video_key",
    "with_relaxed",
    "write_results",
]
