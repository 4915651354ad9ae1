"""One benchmark cell as one Slurm job (`--executor slurm`): the callable submitit pickles. It runs exactly
the cell a local run would (`runner.run_cells`: the pair's feature store, then the protocol, the results JSON
written atomically where a local run writes it), so a job that runs twice ends with the same file.

Requeue and preemption: a cell is atomic (its results file appears whole or not at all) and idempotent (a
done cell is skipped; the store keeps every video it finished, and a rerun encodes only the rest). A job that
Slurm requeues (`scontrol requeue`, preemption) therefore starts the same call again and resumes from the
cell's finished parts. On a timeout Slurm signals the job first (submitit's USR2, 90 s before the limit);
`CellJob.checkpoint` hands submitit the same call, which requeues the job (up to 3 times)."""

from __future__ import annotations

from typing import Any

from plstitch_eval.benchmark.cells import NA, RESULTS_DIR, Cell, cell_settings, cell_state, plan_cells
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.runner import run_cells
from plstitch_eval.errors import ConfigError, EvaluationError

__all__ = ["CellFailedError", "CellJob", "cell_key"]


class CellFailedError(EvaluationError):
    """A cell's job ended with the cell failed (its error is the message, as the table names it)."""


def cell_key(cell: Cell) -> str:
    """The cell's name in the jobs record and its logs' names: its results path under OUT/results, without
    `.json` (`<model_dir>/<dataset>/<protocol>`; unique, as results paths are)."""
    return cell.results_path.relative_to(cell.out / RESULTS_DIR).with_suffix("").as_posix()


class CellJob:
    """Run the cell `key` of `config` (a Slurm job's whole work); raises `CellFailedError` when the cell
    fails, so the job ends FAILED and submitit's result file holds the error."""

    def __init__(self, config: BenchmarkConfig, key: str) -> None:
        self.config = config
        self.key = key

    def __call__(self) -> dict[str, Any]:
        cells = {cell_key(c): c for c in plan_cells(self.config)}
        if self.key not in cells:
            raise ConfigError(f"cell {self.key!r} is not a cell of this benchmark (its settings changed?)")
        cell = cells[self.key]
        state, _ = cell_state(cell, cell_settings(self.config, cell))
        if state == "done":  # a requeued job whose first life finished the cell
            return {"cell": cell.name, "status": "done", "resumed": True}
        run_cells(self.config, [cell])
        if cell.status == NA:  # its store has no labels of its task: the table shows it n/a
            return {"cell": cell.name, "status": NA, "reason": cell.reason}
        if cell.status != "done":
            raise CellFailedError(cell.error or "the cell did not finish")
        return {"cell": cell.name, "status": "done", "resumed": False, "seconds": cell.seconds}

    def checkpoint(self) -> Any:
        """submitit calls this on a timeout or preemption signal: requeue the same cell (what it finished
        stays on disk: the store's videos; the results file is written whole or not at all)."""
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self)
