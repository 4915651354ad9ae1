"""Which cells of a benchmark have labels to run on: a cell whose dataset carries no labels of its task
(`--tasks triplets` on Cholec80, phases on JIGSAWS) is "n/a" - neither run nor failed, shown as n/a in the
table, counted apart in the closing line, and decided again from the store (or, before its store exists,
from the dataset adapter) on every run, so a rerun never retries it as a failure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from plstitch_eval.benchmark.cells import NA, Cell
from plstitch_eval.benchmark.datasets_file import DatasetSpec
from plstitch_eval.benchmark.inputs import PHASES
from plstitch_eval.errors import PlstitchError
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import Task, get_task, registered_tasks

__all__ = [
    "ADAPTER_KEYS",
    "NA",
    "adapter_labels",
    "built_labels",
    "cell_task",
    "dataset_labels",
    "mark_unlabelled",
    "na_line",
    "unlabelled",
]

# the manifest keys `dataset_labels` reads off an adapter; a task needing another key waits for its store
ADAPTER_KEYS = ("class_names", "tool_names", "triplet_names", "cvs_names", "skill")
NA_SHOWN = 3  # reasons named in the closing line


def cell_task(cell: Cell) -> Task | None:
    """The task whose labels the cell reads: a task cell's own; a phase-table cell's, by its protocol (the
    phase protocols: phases; `linear-tools`: tools); None for a protocol no task names (a plugin's)."""
    if cell.task != PHASES:
        return get_task(cell.task)
    phases = get_task(PHASES)
    if cell.protocol in phases.protocols:
        return phases
    return next((t for t in registered_tasks() if cell.protocol in t.results_tasks.values()), None)


def dataset_labels(adapter: Any) -> dict[str, Any]:
    """The label keys (`ADAPTER_KEYS`) a store of `adapter`'s dataset would record, as extraction writes
    them (`extract/store.py`), so a pair's n/a cells are known before its store is extracted."""
    from plstitch_eval.extract.store import cvs_names, skill_record, triplet_names

    return {
        "class_names": list(adapter.class_names),
        "tool_names": list(getattr(adapter, "tool_names", []) or []),
        **triplet_names(adapter),
        **cvs_names(adapter),
        **skill_record(adapter),
    }


def adapter_labels(build: Callable[[], Any]) -> dict[str, Any] | None:
    """`dataset_labels` of the adapter `build()` gives; None when it cannot be built or list its videos (the
    cells' own run says why: extraction fails them with the error)."""
    try:
        return dataset_labels(build())
    except KeyboardInterrupt:
        raise
    except Exception:
        return None


def built_labels(dataset: DatasetSpec) -> dict[str, Any] | None:
    """`adapter_labels` of `dataset`'s adapter, built here."""
    return adapter_labels(dataset.build)


def unlabelled(cell: Cell, manifest: Mapping[str, Any], source: str = "store") -> str | None:
    """Why `cell` is n/a on a store with `manifest` (`source` "dataset": what its adapter would write, which
    decides only the tasks whose keys it knows), or None when it has the labels or it cannot say."""
    task = cell_task(cell)
    if task is None or (source == "dataset" and set(task.label_keys) - set(ADAPTER_KEYS)):
        return None
    lacking = task.lacking(manifest)
    if not lacking:
        return None
    return f"{_short(cell)} (its {source} records no {', '.join(lacking)})"


def _short(cell: Cell) -> str:
    task = cell_task(cell)
    return f"{cell.dataset.name} has no {task.name if task else cell.task} labels"


def _store_manifest(cell: Cell) -> dict[str, Any] | None:
    try:
        return FeatureStore(cell.store).manifest
    except PlstitchError:  # not extracted yet (or unreadable: extraction says so)
        return None


def mark_unlabelled(
    cells: Iterable[Cell], adapter_labels: Callable[[], dict[str, Any] | None] | None = None
) -> list[Cell]:
    """Mark each pending cell without its task's labels n/a (its `reason` says why): from its store's
    manifest, else from `adapter_labels()` (called once, None: cannot say); the cells marked."""
    marked, labels, asked = [], None, False
    for cell in cells:
        if cell.status != "pending":
            continue
        manifest, source = _store_manifest(cell), "store"
        if manifest is None and adapter_labels is not None:
            if not asked:
                labels, asked = adapter_labels(), True
            manifest, source = labels, "dataset"
        reason = None if manifest is None else unlabelled(cell, manifest, source)
        if reason is not None:
            cell.status, cell.reason = NA, reason
            marked.append(cell)
    return marked


def na_line(cells: Iterable[Cell]) -> str | None:
    """`3 cells n/a: cholec80 has no triplets labels (2), jigsaws has no phases labels (1)`; None when no
    cell is n/a."""
    reasons = Counter(_short(c) for c in cells if c.status == NA)
    if not reasons:
        return None
    shown = ", ".join(f"{why} ({n})" for why, n in list(reasons.items())[:NA_SHOWN])
    more = " ..." if len(reasons) > NA_SHOWN else ""
    total = sum(reasons.values())
    return f"{total} cell{'s' if total > 1 else ''} n/a: {shown}{more}"
