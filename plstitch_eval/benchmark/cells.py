"""The cells of a run (one per model x dataset x protocol, and per regression task x protocol x seed), where
their files go, and whether a results file on disk is done, stale or made otherwise: what lets a rerun finish
only what is missing."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.datasets_file import DatasetSpec
from plstitch_eval.benchmark.inputs import PHASES
from plstitch_eval.benchmark.models import model_dirs, sha256_text
from plstitch_eval.errors import ConfigError, PlstitchError
from plstitch_eval.protocols.fractions import fraction_label
from plstitch_eval.store.features import FeatureStore, compat_key

CELL_SCHEMA = "plstitch.benchmark-cell/v1"
FEATURES_DIR, RESULTS_DIR = "features", "results"
SLURM_DIR = "slurm"  # `--executor slurm`: the jobs' record, their logs named by cell, submitit's files
MAX_ERRORS_SHOWN = 3
NA = "n/a"  # a cell whose dataset has no labels of its task: not run, not failed (`applicable.py`)


@dataclass
class Cell:
    """One (model, dataset, protocol) of the run (a regression task's: and task, seed), with where its files
    go and how it ended."""

    model: str
    model_dir: str
    dataset: DatasetSpec
    protocol: str
    out: Path
    status: str = "pending"  # pending | done | failed | n/a
    resumed: bool = False  # finished by an earlier run
    error: str | None = None
    reason: str | None = None  # an n/a cell's: which labels its dataset lacks
    seconds: float = 0.0
    metrics: dict[str, float | None] = field(default_factory=dict)
    metrics_std: dict[str, float | None] = field(default_factory=dict)
    fraction: float = 1.0  # the share of the training videos it trains on (`--fractions`)
    task: str = PHASES  # `--tasks`: phases (the phase table) or a regression task
    seed: int | None = None  # a regression task's cell: its seed (None: a deterministic protocol, k-NN)

    @property
    def store(self) -> Path:
        """The (model, dataset) feature store, shared by the pair's protocols."""
        return self.out / FEATURES_DIR / self.model_dir / self.dataset.name

    @property
    def results_path(self) -> Path:
        """This cell's results JSON (a cell below fraction 1: in the folder `fraction-<F>` beside; a
        regression task's: `<task>/<protocol>[-seed<S>].json`)."""
        folder = self.out / RESULTS_DIR / self.model_dir / self.dataset.name
        if self.task != PHASES:
            seed = "" if self.seed is None else f"-seed{self.seed}"
            return folder / self.task / f"{self.protocol}{seed}.json"
        if self.fraction < 1:
            folder = folder / f"fraction-{self.fraction:g}"
        return folder / f"{self.protocol}.json"

    @property
    def name(self) -> str:
        """`model | dataset | protocol` (`| 1/8 of train` below fraction 1; a task's `model | dataset | task |
        protocol | seed S`), for status lines and errors."""
        if self.task != PHASES:
            seed = "" if self.seed is None else f" | seed {self.seed}"
            return f"{self.model} | {self.dataset.name} | {self.task} | {self.protocol}{seed}"
        share = f" | {fraction_label(self.fraction)} of train" if self.fraction < 1 else ""
        return f"{self.model} | {self.dataset.name} | {self.protocol}{share}"


def plan_cells(config: BenchmarkConfig) -> list[Cell]:
    """Every cell, model-major (then dataset, protocol, fraction): the order they run and appear in; then the
    regression tasks' cells, model-major (then dataset, task, protocol, seed)."""
    dirs = model_dirs(config.models)
    phases = [
        Cell(model, dirs[model], dataset, protocol, config.out, fraction=fraction)
        for model in config.models
        for dataset in config.datasets
        for protocol in config.protocols
        for fraction in config.fractions
    ]
    tasks = [
        Cell(model, dirs[model], dataset, protocol, config.out, task=task, seed=seed)
        for model in config.models
        for dataset in config.datasets
        for task in config.regression_tasks
        for protocol in config.task_protocols(task)
        for seed in config.cell_seeds(protocol, task)
    ]
    return (phases if PHASES in config.tasks else []) + tasks


def cell_settings(config: BenchmarkConfig, cell: Cell) -> dict[str, Any]:
    """What the cell's numbers depend on: a phase cell's `settings`, a task cell's `task_cell_settings`."""
    if cell.task == PHASES:
        return config.settings(cell.model, cell.dataset, cell.protocol, cell.fraction)
    return config.task_cell_settings(cell.model, cell.dataset, cell.task, cell.protocol, cell.seed)


def store_digest(manifest: dict[str, Any]) -> str:
    """Digest of what makes a store's features (compat key, precision, creation time)."""
    key = {
        "compat": compat_key(manifest),
        "precision": manifest.get("precision"),
        "created": manifest.get("created"),
    }
    return sha256_text(json.dumps(key, sort_keys=True, default=str))


def cell_state(cell: Cell, settings: dict[str, Any]) -> tuple[str, str]:
    """("missing" | "done" | "stale" | "conflict", why) of a cell's results JSON on disk.

    done: made with `settings` from the store as it is now; stale: its store changed since (recompute);
    conflict: made with other settings or not by the benchmark (refused unless overwrite).
    """
    return results_state(cell.results_path, cell.store, settings)


def results_state(path: Path, store: Path, settings: dict[str, Any]) -> tuple[str, str]:
    """`cell_state` of the results JSON `path` scored on the feature store `store` (`--status` reads a cell
    by its paths alone)."""
    if not path.exists():
        return "missing", ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return "conflict", f"is not readable JSON ({exc})"
    mark = data.get("benchmark") if isinstance(data, dict) else None
    if not isinstance(mark, dict) or "settings" not in mark:
        return "conflict", "was not written by `plstitch benchmark`"
    if mark["settings"] != settings:
        return "conflict", f"was made with other settings ({_settings_diff(mark['settings'], settings)})"
    try:
        manifest = FeatureStore(store).manifest
    except PlstitchError:
        return "stale", f"its feature store {store} is gone"
    if mark.get("store_sha256") != store_digest(manifest):
        return "stale", f"its feature store {store} changed since it was scored"
    return "done", ""


def checked_states(config: BenchmarkConfig, cells: list[Cell]) -> dict[int, tuple[str, str]]:
    """Each cell's `cell_state`, by `id(cell)`; results made otherwise (a conflict) are refused in one line
    unless `config.overwrite`."""
    states = {id(c): cell_state(c, cell_settings(config, c)) for c in cells}
    conflicts = [(c, why) for c in cells for state, why in [states[id(c)]] if state == "conflict"]
    if conflicts and not config.overwrite:
        cell, why = conflicts[0]
        more = f" ({len(conflicts)} results files in all)" if len(conflicts) > 1 else ""
        raise ConfigError(
            f"{cell.results_path} {why}{more}; rerun with the options it was made with, choose another "
            "--out, or pass --overwrite to recompute it."
        )
    return states


def _settings_diff(old: Any, new: Any, prefix: str = "") -> str:
    """`key: old -> new` for the first differing leaves of two settings dicts."""
    diffs: list[str] = []

    def walk(a: Any, b: Any, key: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                walk(a.get(k), b.get(k), f"{key}.{k}" if key else str(k))
        elif a != b:
            diffs.append(f"{key}: {a!r} -> {b!r}")

    walk(old, new, prefix)
    return "; ".join(diffs[:MAX_ERRORS_SHOWN]) + (" ..." if len(diffs) > MAX_ERRORS_SHOWN else "")


def read_cell_metrics(path: Path) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """(metrics, metrics_std) of a results JSON (NaN was written as null)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return dict(data.get("metrics") or {}), dict(data.get("metrics_std") or {})


def read_done_results(cell: Cell) -> dict[str, Any]:
    """A done cell's results JSON ({} for a cell not done, or a file gone or unreadable since)."""
    if cell.status != "done":
        return {}
    try:
        return json.loads(cell.results_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def finite_number(value: Any) -> float | None:
    """A JSON metric as a float, None where it is missing, null or not finite."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
