"""`plstitch benchmark --executor slurm`: every cell not done yet submitted as one Slurm job (one job array
for the lot, as they share their resources), the jobs recorded in `OUT/slurm/jobs.json`; a rerun submits
only the cells that are missing or whose job failed, and leaves queued and running ones alone. When every
cell has ended (`--wait`, or a later rerun) the table and figures are written as a local run writes them."""

from __future__ import annotations

import time
from collections import Counter

from plstitch_eval.benchmark.applicable import built_labels, mark_unlabelled
from plstitch_eval.benchmark.cell_job import CellJob, cell_key
from plstitch_eval.benchmark.cells import (
    NA,
    Cell,
    cell_settings,
    checked_states,
    plan_cells,
    read_cell_metrics,
)
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.runner import BenchmarkResult, check_out_dir, write_tables
from plstitch_eval.benchmark.slurm_cells import (
    DONE,
    FAILED,
    MISSING,
    CellRecord,
    CellStatus,
    cell_statuses,
    logs_folder,
    read_records,
    record_of,
    submitit_folder,
    write_records,
)
from plstitch_eval.cluster import (
    QUEUED,
    RUNNING,
    SlurmSettings,
    import_submitit,
    link_logs,
    slurm_executor,
    submit_array,
)
from plstitch_eval.utils.console import console

__all__ = ["JOB_NAME", "run_on_slurm"]

JOB_NAME = "plstitch-benchmark"
RESUBMIT = (MISSING, FAILED)  # the cells a run submits; queued, running and done ones are left alone


def run_on_slurm(config: BenchmarkConfig, settings: SlurmSettings) -> BenchmarkResult | None:
    """Submit the cells of `config` that are not done (nor queued, nor running) as Slurm jobs; with
    `settings.wait` wait for them. Returns the table once every cell has ended, else None (jobs still out:
    a line says how many, and how to follow them)."""
    import_submitit()  # without the extra: one line, before anything is written
    check_out_dir(config.out)
    cells = plan_cells(config)
    checked_states(config, cells)  # results made otherwise: refused unless --overwrite, as a local run does
    earlier = read_records(config.out)
    records: dict[str, CellRecord] = {}
    for cell in cells:
        key = cell_key(cell)
        records[key] = record_of(cell, key, cell_settings(config, cell), earlier.get(key))
    statuses = cell_statuses(config.out, records)
    _mark_unlabelled(config, cells, [statuses[record.key] for record in records.values()])
    pairs = zip(cells, records.values(), strict=True)
    todo = [
        (cell, record)
        for cell, record in pairs
        if statuses[record.key].status in RESUBMIT and cell.status != NA
    ]
    if todo:
        _submit(config, settings, todo)
    write_records(config.out, {**earlier, **records})
    statuses = cell_statuses(config.out, records) if todo else statuses
    while settings.wait and _out(statuses):
        time.sleep(settings.poll_seconds)
        statuses, before = cell_statuses(config.out, records), statuses
        if _counts(statuses) != _counts(before):
            console.print(f"slurm: {_counts(statuses)}", highlight=False)
    if _out(statuses):
        console.print(
            f"slurm: {_counts(statuses)}; rerun the same command when they have ended to write the table "
            f"(`plstitch benchmark --out {config.out} --status` shows each cell).",
            highlight=False,
            soft_wrap=True,
        )
        return None
    submitted = {record.key for _, record in todo}
    return _table(config, cells, [statuses[key] for key in records], submitted)


def _submit(config: BenchmarkConfig, settings: SlurmSettings, todo: list[tuple[Cell, CellRecord]]) -> None:
    """One job array of `todo`'s cells; each record gets its job id (the one before kept) and its log link."""
    folder = submitit_folder(config.out)
    executor = slurm_executor(settings, folder, JOB_NAME)
    job_ids = submit_array(executor, [CellJob(config, record.key) for _, record in todo])
    for (_, record), job_id in zip(todo, job_ids, strict=True):
        if record.job_id is not None:
            record.earlier_jobs = [*record.earlier_jobs, record.job_id]
        record.job_id = job_id
        link = link_logs(folder, job_id, logs_folder(config.out), record.key.replace("/", "__"))
        record.log = link.relative_to(config.out).as_posix()
    jobs = f"job array {job_ids[0].split('_')[0]}" if len(job_ids) > 1 else f"job {job_ids[0]}"
    console.print(
        f"slurm: submitted {len(todo)} cell(s) as {jobs}; logs in {logs_folder(config.out)}",
        highlight=False,
        soft_wrap=True,
    )


def _out(statuses: dict[str, CellStatus]) -> bool:
    """True while some cell's job is queued or running."""
    return any(s.status in (QUEUED, RUNNING) for s in statuses.values())


def _counts(statuses: dict[str, CellStatus]) -> str:
    """`2 done, 1 running, 1 queued` (in that order; failed and missing too where there are some)."""
    counts = Counter(s.status for s in statuses.values())
    order = (DONE, RUNNING, QUEUED, FAILED, NA, MISSING)
    return ", ".join(f"{counts[name]} {name}" for name in order if counts[name])


def _mark_unlabelled(config: BenchmarkConfig, cells: list[Cell], statuses: list[CellStatus]) -> None:
    """Mark n/a the cells not done whose store has no labels of their task; where a job of the dataset ended
    without results and left no store (a pair of n/a cells only), what its adapter says, built here. A job
    finds its cell n/a itself too, and ends without a results file."""
    for dataset in config.datasets:
        mine = [(c, s) for c, s in zip(cells, statuses, strict=True) if c.dataset is dataset]
        mine = [(c, s) for c, s in mine if s.status != DONE]
        ended = any(s.status in (FAILED, NA) for _, s in mine)
        mark_unlabelled([c for c, _ in mine], (lambda d=dataset: built_labels(d)) if ended else None)


def _table(
    config: BenchmarkConfig, cells: list[Cell], statuses: list[CellStatus], submitted: set[str]
) -> BenchmarkResult:
    """The table of cells that have all ended, written as a local run writes it: a done cell's numbers from
    its results file (`resumed` when no job of this command made it), a failed cell with its job's error,
    an n/a cell (its store has no labels of its task; its job, if any, left no results) as n/a."""
    _mark_unlabelled(config, cells, statuses)  # the stores the jobs made
    for cell, status in zip(cells, statuses, strict=True):
        if cell.status == NA and status.status != DONE:
            continue
        if status.status == NA:  # its job found the store without the task's labels
            cell.status, cell.reason = NA, status.error
            continue
        if status.status == DONE:
            cell.metrics, cell.metrics_std = read_cell_metrics(cell.results_path)
            cell.status, cell.resumed = "done", status.key not in submitted
        else:
            cell.status, cell.error = "failed", f"slurm job {status.job_id}: {status.error}"
    return write_tables(config, cells)
