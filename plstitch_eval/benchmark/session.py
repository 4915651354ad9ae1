"""One `plstitch benchmark` command line's run: the protocols' settings from `--config FILE` and `--set`
(`protocol_tables`), the Slurm settings of `--executor slurm` (`slurm_launch`), then the run - here, or as
Slurm jobs - with its table, closing lines and exit code (`benchmark_session`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark import runner
from plstitch_eval.benchmark.applicable import na_line
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.config_file import read_config_file, read_slurm_table
from plstitch_eval.benchmark.runner import BenchmarkResult
from plstitch_eval.cluster import SLURM, SlurmSettings, check_executor, slurm_settings
from plstitch_eval.protocols.settings import (
    Tables,
    merge_tables,
    parse_set_items,
    section_configs,
    table_device,
    unsectioned_tables,
)
from plstitch_eval.utils.console import console, print_error, result_console
from plstitch_eval.utils.device import resolve_device
from plstitch_eval.utils.io import write_json_output

__all__ = ["ProtocolTables", "benchmark_session", "failed_cells_line", "protocol_tables", "slurm_launch"]

FAILED_SHOWN = 3  # failed cells named in the closing line; the table names every one


@dataclass(frozen=True)
class ProtocolTables:
    """The protocols' settings a command line gave (`--config FILE`, then `--set` over it): the tables by
    protocol, each section's base config (knn, linear, temporal) and the device each section runs on."""

    tables: Tables
    bases: dict[str, Any]
    devices: dict[str, str]

    def section(self, name: str) -> dict[str, Any]:
        """The `device` and `base` keywords of section `name`'s config builder (knn, linear, temporal)."""
        return {"device": self.devices[name], "base": self.bases[name]}

    @property
    def unsectioned(self) -> Tables:
        """The tables of the protocols without a `BenchmarkConfig` field (`protocol_configs`)."""
        return unsectioned_tables(self.tables)


def protocol_tables(
    config_file: Path | None, set_items: Sequence[str] | None, device: str | None
) -> ProtocolTables:
    """The settings of `--config FILE` and `--set` (the latter wins), each section's base config that the
    command's own flags then go over, and its device (`--device` when given, else the tables', else auto)."""
    file_tables = read_config_file(config_file) if config_file is not None else {}
    tables = merge_tables(file_tables, parse_set_items(set_items or []))
    bases = section_configs(tables)
    devices = {s: str(resolve_device(table_device(tables, s, device))) for s in bases}
    return ProtocolTables(tables, bases, devices)


def slurm_launch(
    executor: str, config_file: Path | None, *, wait: bool = False, **flags: Any
) -> SlurmSettings | None:
    """The Slurm settings of `--executor slurm` (`--config FILE`'s `[slurm]` table, the `--slurm-*` flags
    and `--wait` over it); None for `--executor local`, which runs here as always."""
    if check_executor(executor) != SLURM:
        return None
    table = read_slurm_table(config_file) if config_file is not None else {}
    return slurm_settings(table, **flags, wait=wait or None)


def benchmark_session(
    config: BenchmarkConfig, json_path: Path | None, slurm: SlurmSettings | None = None
) -> int:
    """Run `config` (here, or with `slurm` as Slurm jobs); print the table (stdout, or stderr when `--json -`
    takes stdout) and where it is, and how many cells are n/a (no labels of their task); the exit code: 0
    (n/a cells too), 1 when a cell failed, 130 when interrupted (what is finished stays). On Slurm without
    the table yet (jobs still out): 0, after a line saying so."""
    try:
        if slurm is None:
            result = runner.run_benchmark(config)  # looked up when run, so a test can stand in for it
        else:
            from plstitch_eval.benchmark.slurm_run import run_on_slurm

            result = run_on_slurm(config, slurm)
    except KeyboardInterrupt:
        print_error(
            f"{config.out} holds every cell finished so far; rerun the same command to finish the rest.",
            label="interrupted",
            style="yellow",
        )
        return 130
    if result is None or result.table is None:  # jobs still out, or a torchrun rank other than 0
        return 0
    to_stdout = json_path is not None and str(json_path) == "-"
    shown = console if to_stdout else result_console(soft_wrap=True)
    shown.print(result.markdown, highlight=False)
    if result.label_efficiency is not None:  # --fractions: the curves' tables under the table
        shown.print(result.label_efficiency, highlight=False)
    if json_path is not None:
        write_json_output(json_path, result.table)
    console.print(f"table: {result.table_md}, {result.table_json}", highlight=False)
    if result.label_figure is not None:
        line = f"label efficiency: {result.label_figure} (and .md, .json beside it)"
        console.print(line, highlight=False, soft_wrap=True)
    if result.tasks_figure is not None:  # --tasks with a regression task
        console.print(f"tasks figure: {result.tasks_figure}", highlight=False, soft_wrap=True)
    unlabelled = na_line(result.cells)
    if unlabelled is not None:
        console.print(unlabelled, highlight=False, soft_wrap=True)
    if not result.ok:
        print_error(failed_cells_line(result))
        return 1
    return 0


def failed_cells_line(result: BenchmarkResult) -> str:
    """The closing line of a run with failed cells: how many, the first few by name, and the fix."""
    names = ", ".join(cell.name for cell in result.failed[:FAILED_SHOWN])
    more = " ..." if len(result.failed) > FAILED_SHOWN else ""
    return (
        f"{len(result.failed)} of {len(result.cells)} cell(s) failed ({names}{more}); the table names each "
        "error. Fix them and rerun the same command to finish only those."
    )
