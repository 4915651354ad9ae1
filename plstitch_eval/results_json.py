"""The ``plstitch.results/v1`` dict every protocol returns, and writing it (docs/results-json.md).

Why its own home: k-NN, linear, temporal, CV and scored files, and the readers of results (tables, cards,
export checks) all meet at this schema.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval import __version__
from plstitch_eval.metrics.scoring import default_metrics
from plstitch_eval.utils.io import write_json_output

SCHEMA = "plstitch.results/v1"
# what a results `task` is called (labels, titles) is each protocol's: `plstitch_eval.protocols.registry`
# the reference rows every table of encoders carries beside them (quickstart, reproduce)
RANDOM_INIT_ROW, RAW_PIXELS_ROW, MAJORITY_ROW = "random-init", "raw-pixels", "majority"


@dataclass(frozen=True)
class RunFields:
    """What a results dict records about its run ahead of the scores: the leading arguments, in this order
    (positional or by name), of both `results_record` and `build_results`."""

    task: str
    manifest: dict[str, Any]
    features: str | Path | None
    protocol: dict[str, Any]
    splits: dict[str, Any]
    class_names: Sequence[str]

    def record(
        self,
        *,
        headline: Sequence[str],
        metrics: dict[str, Any],
        per_video: dict[str, Any],
        predictions: dict[str, Any],
    ) -> dict[str, Any]:
        """The schema's fields in order, this run's first, then the given scores and predictions."""
        model = self.manifest.get("model") or {}
        return {
            "schema": SCHEMA,
            "task": self.task,
            "dataset": self.manifest.get("dataset"),
            "features": str(self.features) if self.features is not None else None,
            "model": {"spec": model.get("spec"), "provenance": model.get("provenance", {})},
            "protocol": self.protocol,
            "splits": self.splits,
            "class_names": list(self.class_names),
            "headline_metrics": list(headline),
            "metrics": metrics,
            "per_video": per_video,
            "predictions": predictions,
            "plstitch_version": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        }


@dataclass(frozen=True)
class PhaseRun(RunFields):
    """`build_results`' arguments: the run's fields, then `scoring.score_videos`' dict and the predicted class
    ids per video."""

    scored: dict[str, Any]
    predictions: dict[str, np.ndarray]


def build_results(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """Assemble a ``plstitch.results/v1`` dict of a phase task (see docs/results-json.md).

    Arguments: `PhaseRun`'s fields, positional or by name: ``task, manifest, features, protocol, splits,
    class_names, scored, predictions``.
    """
    run = PhaseRun(*args, **kwargs)
    return run.record(
        headline=default_metrics(run.manifest.get("dataset")),
        metrics={k: float(v) for k, v in run.scored["metrics"].items()},
        per_video=run.scored["per_video"],
        predictions={v: np.asarray(p).astype(int).tolist() for v, p in run.predictions.items()},
    )


def results_record(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The schema's fields in order, for any task (phases: `build_results`; tools: `tool_presence`).

    Arguments: `RunFields`' fields (``task, manifest, features, protocol, splits, class_names``, positional or
    by name), then by name those of `RunFields.record` (``headline, metrics, per_video, predictions``).
    """
    names = {f.name for f in fields(RunFields)}
    run = RunFields(*args, **{k: kwargs.pop(k) for k in names & set(kwargs)})
    return run.record(**kwargs)


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
