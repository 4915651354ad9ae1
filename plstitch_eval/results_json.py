"""The ``plstitch.results/v1`` dict every protocol returns, and writing it (docs/results-json.md).

Why its own home: k-NN, linear, temporal, CV and scored files, and the readers of results (tables, cards,
export checks) all meet at this schema.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval import __version__
from plstitch_eval.scoring import default_metrics
from plstitch_eval.utils.io import write_json_output

SCHEMA = "plstitch.results/v1"
# what a results `task` is called: short labels for table columns, titles for model-card metric names
TOOLS_TASK = "linear-tools"  # tool presence (multi-label linear probe, AP / mAP): plstitch_eval.tool_presence
TASK_LABELS = {
    "knn": "k-NN",
    "linear": "linear",
    TOOLS_TASK: "linear (tools)",
    "temporal": "MS-TCN",
    "cv-knn": "CV k-NN",
    "cv-linear": "CV linear",
    "cv-temporal": "CV MS-TCN",
}
TASK_TITLES = {
    "knn": "k-NN",
    "linear": "Linear probe",
    TOOLS_TASK: "Tool presence (linear probe, AP)",
    "temporal": "MS-TCN on frozen features",
    "cv": "Cross-validated linear probe",
    "score": "Scored",
}
# the reference rows every table of encoders carries beside them (quickstart, reproduce)
RANDOM_INIT_ROW, RAW_PIXELS_ROW, MAJORITY_ROW = "random-init", "raw-pixels", "majority"


def build_results(
    task: str,
    manifest: dict[str, Any],
    features: str | Path | None,
    protocol: dict[str, Any],
    splits: dict[str, Any],
    class_names: Sequence[str],
    scored: dict[str, Any],
    predictions: dict[str, np.ndarray],
) -> dict[str, Any]:
    """Assemble a ``plstitch.results/v1`` dict of a phase task (see docs/results-json.md)."""
    return results_record(
        task,
        manifest,
        features,
        protocol,
        splits,
        class_names,
        headline=default_metrics(manifest.get("dataset")),
        metrics={k: float(v) for k, v in scored["metrics"].items()},
        per_video=scored["per_video"],
        predictions={v: np.asarray(p).astype(int).tolist() for v, p in predictions.items()},
    )


def results_record(
    task: str,
    manifest: dict[str, Any],
    features: str | Path | None,
    protocol: dict[str, Any],
    splits: dict[str, Any],
    class_names: Sequence[str],
    *,
    headline: Sequence[str],
    metrics: dict[str, Any],
    per_video: dict[str, Any],
    predictions: dict[str, Any],
) -> dict[str, Any]:
    """The schema's fields in order, for any task (phases: `build_results`; tools: `tool_presence`)."""
    model = manifest.get("model") or {}
    return {
        "schema": SCHEMA,
        "task": task,
        "dataset": manifest.get("dataset"),
        "features": str(features) if features is not None else None,
        "model": {"spec": model.get("spec"), "provenance": model.get("provenance", {})},
        "protocol": protocol,
        "splits": splits,
        "class_names": list(class_names),
        "headline_metrics": list(headline),
        "metrics": metrics,
        "per_video": per_video,
        "predictions": predictions,
        "plstitch_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
    }


def write_results(path: str | Path, results: dict[str, Any]) -> None:
    """Write a results dict as JSON atomically, or to stdout when `path` is "-" (NaN becomes null)."""
    write_json_output(path, _nan_to_none(results))


def _nan_to_none(obj: Any) -> Any:
    if isinstance(obj, float) and not np.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_nan_to_none(v) for v in obj]
    return obj
