"""Running a benchmark: every missing cell, dataset by dataset (the models with pending cells there extracted
in one pass that decodes each video once, one store per pair, then its protocols), failures recorded per
cell, then the table written; sharded over the ranks under torchrun."""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from plstitch_eval.benchmark.applicable import adapter_labels, mark_unlabelled
from plstitch_eval.benchmark.cells import (
    CELL_SCHEMA,
    FEATURES_DIR,
    MAX_ERRORS_SHOWN,
    NA,
    RESULTS_DIR,
    SLURM_DIR,
    Cell,
    cell_settings,
    checked_states,
    plan_cells,
    read_cell_metrics,
    store_digest,
)
from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.datasets_file import DatasetSpec
from plstitch_eval.benchmark.inputs import PHASES
from plstitch_eval.benchmark.label_efficiency import write_label_efficiency
from plstitch_eval.benchmark.table import TABLE_JSON, TABLE_MD, benchmark_table, format_value, table_markdown
from plstitch_eval.benchmark.task_table import write_tasks
from plstitch_eval.benchmark.tasks import run_task_cell, task_status
from plstitch_eval.errors import ConfigError, PlstitchError
from plstitch_eval.extract import ExtractSummary, ExtractTarget, extract_many, select_videos
from plstitch_eval.hub import load_encoder
from plstitch_eval.protocols import get_protocol
from plstitch_eval.results_json import write_results
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tables import METRIC_LABELS
from plstitch_eval.utils.console import console, error_console, logger, progress_bar
from plstitch_eval.utils.device import resolve_device
from plstitch_eval.utils.distributed import DistInfo, init_distributed, teardown_distributed
from plstitch_eval.utils.io import write_json_atomic, write_text_atomic


@dataclass
class BenchmarkResult:
    """What a run made: every cell (done, failed or n/a), the table (rank 0 only) and its files."""

    out: Path
    cells: list[Cell]
    table: dict[str, Any] | None = None
    markdown: str | None = None
    table_md: Path | None = None
    table_json: Path | None = None
    rank: int = 0
    label_efficiency: str | None = None  # `--fractions`: the label-efficiency tables (markdown)
    label_figure: Path | None = None  # and their figure (`<out>/label_efficiency.png`)
    tasks_figure: Path | None = None  # `--tasks` with a regression task: `<out>/tasks.png`

    @property
    def failed(self) -> list[Cell]:
        """Cells that ended with an error."""
        return [c for c in self.cells if c.status == "failed"]

    @property
    def not_applicable(self) -> list[Cell]:
        """Cells whose dataset has no labels of their task (not run, not failed)."""
        return [c for c in self.cells if c.status == NA]

    @property
    def ok(self) -> bool:
        """True when every cell finished (or is n/a)."""
        return not self.failed


def run_benchmark(
    config: BenchmarkConfig, *, on_cell_done: Callable[[Cell], None] | None = None
) -> BenchmarkResult:
    """Run every missing cell of `config` into `config.out`, then write the table (markdown + JSON).

    Finished cells are skipped (their model is not even loaded when the whole pair is done), and so are the
    cells whose dataset has no labels of their task (n/a, `applicable.py`). A failing cell is recorded and
    the others go on. Under torchrun every rank extracts its share of each store and rank 0 runs
    the protocols and writes the results; only rank 0 returns the table. `on_cell_done` is called on rank 0
    after each cell ends (tests use it to interrupt a run).
    """
    check_out_dir(config.out)
    cells = plan_cells(config)
    states = checked_states(config, cells)
    info, device = init_distributed(resolve_device(config.extract.device))
    try:
        for cell in cells:
            state, why = states[id(cell)]
            if state in ("stale", "conflict") and info.is_main:
                logger.warning("%s %s; recomputing it.", cell.results_path, why)
            if state == "done":
                cell.status, cell.resumed = "done", True
        _Runner(config, cells, info, device, on_cell_done).run()
    finally:
        teardown_distributed(info)
    if not info.is_main:
        return BenchmarkResult(config.out, cells, rank=info.rank)
    return write_tables(config, cells, info.rank)


def run_cells(config: BenchmarkConfig, cells: list[Cell]) -> None:
    """Run `cells` (their pending ones) as `run_benchmark` runs them, store and results JSON, without the
    table: what one Slurm job of `--executor slurm` does for its cell (`benchmark/cell_job.py`)."""
    info, device = init_distributed(resolve_device(config.extract.device))
    try:
        _Runner(config, cells, info, device, None).run()
    finally:
        teardown_distributed(info)


def write_tables(config: BenchmarkConfig, cells: list[Cell], rank: int = 0) -> BenchmarkResult:
    """The table of the phase cells (markdown + JSON), the regression tasks' sections, block and figure after
    it (`--tasks`), and the label-efficiency files (`--fractions`)."""
    phases = [c for c in cells if c.task == PHASES]
    table = benchmark_table(config, phases)
    markdown = table_markdown(table) if PHASES in config.tasks else ""
    figure = None
    if config.regression_tasks:  # a `tasks` block; failed task cells also count in `failed` and `ok`
        table["tasks"], more, figure = write_tasks(config, cells, config.out)
        markdown = f"{markdown}{more}" if markdown else more.lstrip("\n")
        table["failed"] += table["tasks"]["failed"]
        table["not_applicable"] += table["tasks"]["not_applicable"]
        table["ok"] = not table["failed"]
    write_json_atomic(config.out / TABLE_JSON, table)
    write_text_atomic(config.out / TABLE_MD, markdown)
    result = BenchmarkResult(
        config.out, cells, table, markdown, config.out / TABLE_MD, config.out / TABLE_JSON, rank
    )
    result.tasks_figure = figure
    if config.label_efficiency:  # --fractions: the curves' tables and figure
        result.label_efficiency, result.label_figure = write_label_efficiency(config, phases, config.out)
    return result


def check_out_dir(out: Path) -> None:
    """Refuse an output folder that exists and holds something other than a benchmark."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; choose a new or empty folder.")
    if out.is_dir() and any(out.iterdir()):
        ours = (FEATURES_DIR, RESULTS_DIR, TABLE_JSON, TABLE_MD, SLURM_DIR)
        if not any((out / name).exists() for name in ours):
            raise ConfigError(
                f"--out {out} is not empty and holds no benchmark ({', '.join(ours)}); choose a new or "
                "empty folder."
            )


def _failures(summary: ExtractSummary, store: Path) -> str | None:
    """The error that fails a pair's cells when some of its videos could not be extracted, else None."""
    if not summary.failed:
        return None
    shown = "; ".join(f"{r.video}: {r.error}" for r in summary.failed[:MAX_ERRORS_SHOWN])
    more = " ..." if len(summary.failed) > MAX_ERRORS_SHOWN else ""
    return (
        f"extract: {len(summary.failed)} of {len(summary.results)} video(s) failed ({shown}{more}); "
        f"the others are in {store}"
    )


class _Runner:
    """Walks the cells dataset by dataset: every model with a pending cell there extracted in one pass
    (each video decoded once), each pair's store once, then its protocols."""

    def __init__(
        self,
        config: BenchmarkConfig,
        cells: list[Cell],
        info: DistInfo,
        device: torch.device,
        on_cell_done: Callable[[Cell], None] | None,
    ) -> None:
        self.config = config
        self.cells = cells
        self.info = info
        self.device = device
        self.on_cell_done = on_cell_done
        self.reported = 0
        self.adapters: dict[str, tuple[Any, str | None]] = {}
        self.encoders: dict[str, tuple[Any, str | None]] = {}  # loaded while a later dataset needs them
        self.options = dataclasses.replace(
            config.extract, progress=False, overwrite=config.overwrite or config.extract.overwrite
        )

    def run(self) -> None:
        """Report the cells finished earlier, then do the rest; one overall bar, one line per cell."""
        show = self.config.progress and self.info.is_main
        with progress_bar(disable=not show) as bar:
            self.bar = bar
            self.task = bar.add_task("benchmark", total=len(self.cells))
            for cell in self.cells:
                if cell.status == "done":
                    try:
                        cell.metrics, cell.metrics_std = read_cell_metrics(cell.results_path)
                    except (OSError, ValueError) as exc:  # removed or broken since the state check
                        cell.status, cell.resumed = "pending", False
                        logger.warning("%s: %s; recomputing it.", cell.results_path, exc)
                        continue
                    self._report(cell)
            for position, dataset in enumerate(self.config.datasets):
                self._run_dataset(dataset, self.config.datasets[position + 1 :])

    def _run_dataset(self, dataset: DatasetSpec, later: list[DatasetSpec]) -> None:
        """Every model with a pending cell on `dataset` in one extraction pass (each video decoded once, each
        model into its pair's store), then the cells' protocols; models no later dataset needs are freed.
        Cells without their task's labels are n/a first, so a pair with only those is not extracted."""
        unlabelled = mark_unlabelled(
            [c for c in self.cells if c.dataset is dataset], lambda: self._dataset_labels(dataset)
        )
        for cell in unlabelled:
            self._report(cell)
        pending = {
            model: cells
            for model in self.config.models
            for cells in [[c for c in self._cells_of(model, dataset) if c.status == "pending"]]
            if cells
        }
        ready = []
        for model, cells in pending.items():
            encoder, error = self._encoder(model)
            if error is None:
                ready.append((model, encoder))
            else:
                for cell in cells:
                    self._fail(cell, error)
        errors = self._extract(ready, dataset, {m: cells[0] for m, cells in pending.items()}) if ready else {}
        for model, _ in ready:
            for cell in pending[model]:
                if errors.get(model) is not None:
                    self._fail(cell, errors[model])
                elif self.info.is_main:
                    self._score(cell)
        for model in list(self.encoders):
            if not any(c.status == "pending" for d in later for c in self._cells_of(model, d)):
                del self.encoders[model]
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _encoder(self, model: str) -> tuple[Any, str | None]:
        """The model's encoder, loaded once while some dataset still needs it (its load error too: every
        cell of the model fails with it)."""
        if model not in self.encoders:
            encoder, error = None, None
            try:
                encoder = load_encoder(model, device=str(self.device), trust_pickle=self.config.trust_pickle)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # weights not cached, bad checkpoint, ...: this model's cells fail
                error = f"load model: {describe_error(exc)}"
            self.encoders[model] = (encoder, self._agree(error))
        return self.encoders[model]

    def _cells_of(self, model: str, dataset: DatasetSpec) -> list[Cell]:
        return [c for c in self.cells if c.model == model and c.dataset is dataset]

    def _adapter(self, dataset: DatasetSpec) -> tuple[Any, str | None]:
        """The dataset's adapter, built once (its error too: every cell of the dataset fails with it)."""
        if dataset.name not in self.adapters:
            adapter, error = None, None
            try:
                adapter = dataset.build()
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                error = f"dataset: {describe_error(exc)}"
            self.adapters[dataset.name] = (adapter, self._agree(error))
        return self.adapters[dataset.name]

    def _dataset_labels(self, dataset: DatasetSpec) -> dict[str, Any] | None:
        """The label keys a store of `dataset` would record (None: its adapter fails; extraction says why)."""
        adapter, error = self._adapter(dataset)
        return None if error is not None else adapter_labels(lambda: adapter)

    def _extract(
        self, models: list[tuple[str, Any]], dataset: DatasetSpec, cells: dict[str, Cell]
    ) -> dict[str, str | None]:
        """Create or resume each pair's store in one pass over the dataset; per model, the error that fails
        the pair's cells, else None. A pass that fails as a whole (e.g. one incompatible store) is run again
        model by model, so each error reaches its own pair only."""
        adapter, error = self._adapter(dataset)
        if error is not None:
            return {model: error for model, _ in models}
        errors = self._extract_pass(models, adapter, dataset, cells)
        if isinstance(errors, str):
            if len(models) == 1:
                return {models[0][0]: errors}
            errors = {}
            for model in models:
                one = self._extract_pass([model], adapter, dataset, cells)
                errors.update({model[0]: one} if isinstance(one, str) else one)
        return errors

    def _extract_pass(
        self, models: list[tuple[str, Any]], adapter: Any, dataset: DatasetSpec, cells: dict[str, Cell]
    ) -> dict[str, str | None] | str:
        """One `extract_many` pass of `models` over the dataset: per model its error (or None), or the one
        error that stopped the whole pass."""
        try:
            records = select_videos(
                adapter, self.options.split, self.options.videos, self.options.split_scheme
            )
            mine = records[self.info.rank :: self.info.world_size]
            done = sum(
                FeatureStore(cells[m].store).has(r.name)
                and FeatureStore(cells[m].store).check(r.name) is None
                for m, _ in models
                for r in mine
            )  # damaged: redone
            names = models[0][0] if len(models) == 1 else f"{len(models)} models"
            total = len(mine) * len(models)
            sub = self.bar.add_task(f"extract {names} | {dataset.name}", total=total, completed=done)
            targets = [ExtractTarget(encoder, cells[model].store, model) for model, encoder in models]
            options = self.options
            if dataset.frames is not None:  # the dataset's frame cache instead of its videos
                options = dataclasses.replace(options, frames=dataset.frames)
            try:
                summary = extract_many(
                    adapter, targets, options, on_video_done=lambda _r: self.bar.advance(sub)
                )
            finally:
                self.bar.remove_task(sub)
        except KeyboardInterrupt:
            raise
        except PlstitchError as exc:  # from shared inputs: the same on every rank, so the ranks stay in step
            return f"extract: {describe_error(exc)}"
        except Exception as exc:
            if self.info.active:  # one rank's crash would leave the others waiting at a collective
                raise
            return f"extract: {describe_error(exc)}"
        finally:
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        return {
            model: _failures(store, cells[model].store)
            for (model, _), store in zip(models, summary.stores, strict=True)
        }

    def _score(self, cell: Cell) -> None:
        """Run the cell's protocol on its store and write its results JSON (rank 0); n/a when the store has
        no labels of its task."""
        start = time.perf_counter()
        if mark_unlabelled([cell]):
            self._report(cell)
            return
        try:
            results = self._protocol(cell)
            results["benchmark"] = {
                "schema": CELL_SCHEMA,
                "model": cell.model,
                "dataset": cell.dataset.name,
                "protocol": cell.protocol,
                "settings": cell_settings(self.config, cell),
                "store_sha256": store_digest(FeatureStore(cell.store).manifest),
            }
            if cell.task != PHASES:
                results["benchmark"].update(task=cell.task, seed=cell.seed)
            write_results(cell.results_path, results)
            cell.metrics, cell.metrics_std = read_cell_metrics(cell.results_path)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            cell.seconds = round(time.perf_counter() - start, 2)
            self._fail(cell, f"{cell.protocol}: {describe_error(exc)}")
            return
        cell.status, cell.seconds = "done", round(time.perf_counter() - start, 2)
        self._report(cell)

    def _protocol(self, cell: Cell) -> dict[str, Any]:
        """The cell's results dict: its registered protocol run on its store (`Protocol.run`), at the cell's
        fraction of the training videos (a protocol that draws no subset there fails the cell); a regression
        task's cell: its task's head (`tasks.run_task_cell`)."""
        if cell.task != PHASES:
            return run_task_cell(self.config, cell)
        config = self.config.at_fraction(cell.fraction)
        results = get_protocol(cell.protocol).run(cell.store, config, cell.dataset.split_scheme)
        if cell.fraction < 1 and "train_fraction" not in results:
            raise ConfigError(
                f"protocol {cell.protocol!r} does not train on a fraction of the videos "
                "(protocols/fractions.py); leave it out of --protocols or out of --fractions."
            )
        return results

    def _fail(self, cell: Cell, error: str) -> None:
        cell.status, cell.error = "failed", error
        self._report(cell)

    def _agree(self, error: str | None) -> str | None:
        """Under torchrun: the first rank's error, on every rank (all ranks must skip the same pairs)."""
        if not self.info.active or not dist.is_initialized():
            return error
        gathered: list[str | None] = [None] * self.info.world_size
        dist.all_gather_object(gathered, error)
        errors = [f"rank {r}: {e}" if r else e for r, e in enumerate(gathered) if e]
        return errors[0] if errors else None

    def _report(self, cell: Cell) -> None:
        """Advance the bar and print the cell's status line on stderr (rank 0)."""
        if not self.info.is_main:
            return
        self.reported += 1
        self.bar.advance(self.task)
        prefix = f"[{self.reported}/{len(self.cells)}]"
        if cell.status == "failed":
            target = error_console if console.quiet else console  # failures show under --quiet too
            text = f"{prefix} failed   {cell.name}: {cell.error}"
            target.print(text, style="red", highlight=False, soft_wrap=True)
        elif cell.status == NA:
            console.print(f"{prefix} n/a      {cell.name}: {cell.reason}", highlight=False, soft_wrap=True)
        else:
            numbers = self._numbers(cell)
            how = "(finished earlier)" if cell.resumed else f"({cell.seconds:.1f} s)"
            label = "skipped" if cell.resumed else "done   "
            console.print(f"{prefix} {label}  {cell.name}: {numbers} {how}", highlight=False, soft_wrap=True)
        if self.on_cell_done is not None:
            self.on_cell_done(cell)

    def _numbers(self, cell: Cell) -> str:
        """A done cell's numbers on its status line: its table columns (a task cell: its task's metrics)."""
        if cell.task != PHASES:
            return task_status(cell)
        metrics = self.config.table_metrics(cell.dataset, cell.protocol)
        return ", ".join(f"{METRIC_LABELS.get(m, m)} {format_value(cell.metrics.get(m))}" for m in metrics)


def describe_error(exc: BaseException) -> str:
    """One line naming the error: ours by their message, others with their type (e.g. OutOfMemoryError)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, PlstitchError) else f"{type(exc).__name__}: {text}"
