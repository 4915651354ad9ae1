"""The PL-Stitch paper's reported numbers for a benchmark cell, keyed by our metric names, to sit beside
ours in the table."""

from __future__ import annotations

import functools
from typing import Any

from plstitch_eval.resources import load_paper_results

PAPER_METRICS = {"f1": ("macro_f1_pooled", "macro_f1_video")}  # the paper does not say which F1 it is


@functools.lru_cache(maxsize=1)
def paper_results() -> dict[str, Any]:
    """The paper's reported numbers (`model_cards/paper_results.json`)."""
    return load_paper_results()


def paper_numbers(model: str, adapter: str, protocol: str) -> dict[str, Any] | None:
    """The paper's numbers for a cell, keyed by our metric names, or None where the paper has none.

    A registry model maps to the paper's method through `reference_models`; a checkpoint tied to datasets
    (pl-stitch-lemon: the surgical ones) gets numbers only there. `same_checkpoint` is False where the paper
    measured the method pretrained otherwise (its DINO was pretrained on LEMON, ours on ImageNet).
    """
    data = paper_results()
    ref = next((m for m in data.get("reference_models", []) if m.get("name") == model), None)
    if ref is None or not ref.get("paper_method"):
        return None
    rows = [
        r
        for r in data.get("rows", [])
        if r.get("method") == ref["paper_method"] and str(r.get("dataset", "")).lower() == adapter.lower()
    ]
    if not rows or (ref.get("datasets") is not None and rows[0]["dataset"] not in ref["datasets"]):
        return None
    row, metrics = rows[0], {}
    for key, value in row["metrics"].items():
        proto, _, metric = key.partition("_")
        if proto == protocol:
            metrics.update({ours: float(value) for ours in PAPER_METRICS.get(metric, (metric,))})
    if not metrics:
        return None
    return {
        "method": row["method"],
        "table": row.get("table"),
        "dataset": row["dataset"],
        "same_checkpoint": bool(ref.get("numbers_describe_this_checkpoint")),
        "note": ref.get("note"),
        "metrics": metrics,
    }
