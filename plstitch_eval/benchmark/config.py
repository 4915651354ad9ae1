"""`BenchmarkConfig`: the models x datasets x protocols (x tasks x seeds) of one run and each step's config,
checked up front, and the settings a cell's numbers depend on (what a rerun must match)."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.datasets_file import DatasetSpec, check_unique_names, parse_datasets
from plstitch_eval.benchmark.inputs import PHASES, parse_metrics, parse_protocols, parse_tasks
from plstitch_eval.benchmark.models import expand_models
from plstitch_eval.benchmark.task_kinds import (
    SKILL_TASK,
    UNSEEDED,
    cell_protocols,
    multilabel_inner,
    parse_skill_folds,
    seeded,
    skill_settings,
    table_protocol,
)
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import ExtractOptions
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.metrics.scoring import default_metrics
from plstitch_eval.protocols import (
    RUNTIME_FIELDS,
    cv_protocols,
    get_protocol,
    protocol_names,
    registered_protocols,
)
from plstitch_eval.protocols.fractions import (
    DEFAULT_SEEDS,
    SEEDS_FLAG,
    TrainFraction,
    parse_fraction_seeds,
    parse_fractions,
)
from plstitch_eval.protocols.registry import CV_TASK, cv_task
from plstitch_eval.protocols.settings import protocol_config
from plstitch_eval.tasks import TaskSettings, get_task
from plstitch_eval.tasks.registry import DEFAULT_HORIZON_MIN, MULTI_LABEL, REGRESSION, VIDEO_REGRESSION
from plstitch_eval.temporal.fit import TemporalConfig

__all__ = ["RUNTIME_FIELDS", "UNSEEDED", "BenchmarkConfig"]


@dataclass
class BenchmarkConfig:
    """Everything `plstitch benchmark` runs: models x datasets x protocols into `out`, and each step's config.

    `models` and `datasets` take the CLI forms too (comma lists, collections, `NAME=ROOT`, dataset files).
    """

    models: str | Sequence[str]
    datasets: str | Sequence[str | DatasetSpec]
    out: str | Path
    protocols: str | Sequence[str] = ("knn", "linear")
    extract: ExtractOptions = field(default_factory=ExtractOptions)
    knn: KnnConfig = field(default_factory=KnnConfig)
    linear: LinearConfig = field(default_factory=LinearConfig)
    temporal: TemporalConfig = field(default_factory=TemporalConfig)
    # the config of each protocol without a field above, by name (`--config FILE`'s [protocols.NAME] tables)
    protocol_configs: dict[str, Any] = field(default_factory=dict)
    val_fraction: float = 0.2  # linear / temporal: training videos held out when the store has no val split
    cv_folds: int = 5
    cv_protocol: str = "knn"  # the protocol cross-validated by `cv`
    cv_seed: int = 0
    metrics: str | Sequence[str] | None = None  # table columns; None: each dataset's headline metrics
    # label efficiency: every cell at each share of the training videos (1: all), `fraction_seeds` subsets
    fractions: str | float | Sequence[float] = (1.0,)
    fraction_seeds: str | int | Sequence[int] = DEFAULT_SEEDS
    overwrite: bool = False  # recompute cells made with other settings, replace stores made differently
    trust_pickle: bool = False
    progress: bool = True
    # tasks beside the phase table (`--tasks`, docs/benchmark.md#tasks): regression, multi-label, skill
    tasks: str | Sequence[str] = (PHASES,)
    horizon: float | None = None  # anticipation's horizon in minutes (None: TaskSettings' default, 3)
    anticipate: str | None = None  # what anticipation predicts (None: auto)
    seeds: str | int | Sequence[int] | None = None  # seeds of the task cells that have one; None: (cv_seed,)
    # skill's cv folds: louo, loso (JIGSAWS' trial names; one cell, no seed) or K by video; None: cv_folds
    skill_folds: str | int | None = None
    # the fraction one cell runs at (`at_fraction`; its protocol reads it): not set by hand
    train_fraction: TrainFraction | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.models = expand_models(self.models)
        if isinstance(self.datasets, str):
            self.datasets = parse_datasets(self.datasets)
        else:
            specs: list[DatasetSpec] = []
            for item in self.datasets:
                specs.extend([item] if isinstance(item, DatasetSpec) else parse_datasets(str(item)))
            self.datasets = specs
        if not self.datasets:
            raise ConfigError("--datasets names no dataset; write NAME[=ROOT],... or a datasets file.")
        check_unique_names([d.name for d in self.datasets], "dataset")
        self.protocols = parse_protocols(self.protocols)
        self.metrics = parse_metrics(self.metrics)
        self.out = Path(self.out).expanduser()
        sections = {"extract": ExtractOptions}  # then each protocol's config section, in registry order
        sections.update({p.section: p.config_type for p in registered_protocols() if p.section is not None})
        for name, kind in sections.items():
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"BenchmarkConfig.{name} must be a {kind.__name__}.")
        self.protocol_configs = {name: protocol_config(name, v) for name, v in self.protocol_configs.items()}
        get_protocol(self.cv_protocol, "cv-protocol", cv_protocols())
        if self.cv_folds < 2:
            raise ConfigError(f"--folds must be >= 2, got {self.cv_folds}.")
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"--val-fraction must be between 0 and 1, got {self.val_fraction}.")
        self.fractions = parse_fractions(self.fractions)
        self.fraction_seeds = parse_fraction_seeds(self.fraction_seeds, SEEDS_FLAG)
        self._check_tasks()

    def _check_tasks(self) -> None:
        """`--tasks`, `--horizon`, `--anticipate` and `--seeds`, each refused in one line before anything
        runs: an option no asked task reads, a task no protocol of `--protocols` fits, `--fractions`."""
        self.tasks = parse_tasks(self.tasks)
        seeds_given = self.seeds is not None
        self.seeds = parse_fraction_seeds(self.seeds, "--seeds") if seeds_given else (self.cv_seed,)
        regression = self.regression_tasks
        if (self.horizon is not None or self.anticipate is not None) and not any(
            get_task(task).uses_horizon for task in regression
        ):
            raise ConfigError(
                "--horizon and --anticipate set anticipation's targets; add anticipation to --tasks."
            )
        _ = self.task_settings  # a bad --horizon or --anticipate is TaskSettings' one line
        if self.skill_folds is not None and CV_TASK not in self.task_protocols_of(SKILL_TASK):
            raise ConfigError(
                "--skill-folds sets the folds of the skill cv cells; add skill to --tasks and cv to "
                "--protocols (other cv cells take --folds)."
            )
        self.skill_folds = parse_skill_folds(self.skill_folds, self.cv_folds)
        for task in regression:
            if not self.task_protocols(task):
                fits = [p for p in cell_protocols(get_task(task), "") if p != CV_TASK]
                cv = "cv with --cv-protocol one of them" if get_task(task).head == REGRESSION else "cv"
                also = f" (and {cv})" if fits and CV_TASK in cell_protocols(get_task(task), fits[0]) else ""
                raise ConfigError(
                    f"--tasks {task}: none of --protocols {','.join(self.protocols)} fits it; it runs with "
                    f"{', '.join(fits)}{also}."
                )
        if regression and self.label_efficiency:
            raise ConfigError(
                "--fractions runs the phase cells on shares of the training videos; the --tasks cells train "
                "on the whole training split: run them in a command without --fractions (the same --out is "
                "fine)."
            )
        with_seeds = [p for t in regression for p in self.task_protocols(t) if self._seeded(t, p)]
        if seeds_given and not with_seeds:
            raise ConfigError(
                "--seeds: the seeds of the --tasks cells of linear, temporal and cv (skill: cv over K "
                "folds); no such cell is asked (the phase cells take --seed)."
            )

    @property
    def regression_tasks(self) -> tuple[str, ...]:
        """The tasks of `--tasks` other than phases (each with cells of its own and a table section):
        regression tasks, multi-label tasks (tools, triplets, cvs) and skill."""
        return tuple(task for task in self.tasks if task != PHASES)

    @property
    def task_settings(self) -> TaskSettings:
        """The regression tasks' target settings: `--horizon`, `--anticipate` (TaskSettings' defaults)."""
        horizon = DEFAULT_HORIZON_MIN if self.horizon is None else self.horizon
        return TaskSettings(horizon, self.anticipate or "auto")

    def task_protocols_of(self, task: str) -> tuple[str, ...]:
        """`task_protocols(task)` when `--tasks` asks for `task`, else ()."""
        return self.task_protocols(task) if task in self.regression_tasks else ()

    def _seeded(self, task: str, protocol: str) -> bool:
        return seeded(get_task(task), protocol, str(self.skill_folds))

    def task_protocols(self, task: str) -> tuple[str, ...]:
        """The protocols of `--protocols` that fit `task` (`task_kinds.cell_protocols`: a regression task's
        cv when `--cv-protocol` fits it; a multi-label task's linear; skill's linear and cv)."""
        fits = cell_protocols(get_task(task), self.cv_protocol)
        return tuple(p for p in self.protocols if p in fits)

    def cell_seeds(self, protocol: str, task: str | None = None) -> tuple[int | None, ...]:
        """The seeds of a task's cells on `protocol`: `seeds`, or (None,) for a deterministic one (k-NN,
        skill's ridge on the store's split, skill's cv over LOUO / LOSO folds)."""
        if task is None:
            return (None,) if protocol in UNSEEDED else tuple(self.seeds)
        return tuple(self.seeds) if self._seeded(task, protocol) else (None,)

    def task_record(self, task: str) -> dict[str, Any]:
        """What a task cell's targets depend on: the task, and the horizon and what is anticipated if it reads
        them (so another --horizon leaves the rsd cells valid)."""
        record = {"name": task, **self.task_settings.record()}
        if not get_task(task).uses_horizon:
            del record["horizon_min"], record["anticipate"]
        return record

    def at_seed(self, seed: int | None) -> BenchmarkConfig:
        """This config as a task cell of `seed` runs it: the linear probe's, the MS-TCN's, CV's and each other
        protocol config's seed set to it (None, k-NN: as it is)."""
        if seed is None:
            return self
        view = copy.copy(self)
        view.linear = dataclasses.replace(self.linear, seed=seed)
        view.temporal = dataclasses.replace(self.temporal, seed=seed)
        view.cv_seed = seed
        view.protocol_configs = {name: _seeded(c, seed) for name, c in self.protocol_configs.items()}
        return view

    def task_cell_settings(
        self, model: str, dataset: DatasetSpec, task: str, protocol: str, seed: int | None
    ) -> dict[str, Any]:
        """A task cell's settings: the protocol's at `seed` (`settings`), the task's (`task_record`), seed.
        A multi-label cell's probe is class-balanced and chosen on the task's select metric; a skill cell's
        ridge reads none of the protocols' settings, only its own (`task_kinds.skill_settings`)."""
        head = get_task(task).head
        inner = multilabel_inner(self.cv_protocol) if head == MULTI_LABEL and protocol == CV_TASK else None
        settings = self.at_seed(seed).settings(model, dataset, inner or protocol)
        if head == MULTI_LABEL:  # the linear probe class-balanced; either head chosen on the select metric
            fitted = inner or protocol
            extra = {"balance_classes": True} if fitted == "linear" else {}
            settings[fitted].update(extra, select_metric=get_task(task).select_metric)
        if inner is not None:  # cv of the multi-label head: its folds by video, drawn with the cell's seed
            settings["protocol"] = CV_TASK
            settings["cv"] = {"folds": self.cv_folds, "inner": inner, "seed": self.at_seed(seed).cv_seed}
        elif head == VIDEO_REGRESSION:
            settings = {k: settings[k] for k in ("model", "dataset", "protocol", "extract")}
            settings["skill"] = skill_settings(protocol, str(self.skill_folds), seed)
        settings["task"] = self.task_record(task)
        if seed is not None:
            settings["seed"] = seed
        return settings

    @property
    def label_efficiency(self) -> bool:
        """True when some cells run on a fraction of the training videos (`--fractions`)."""
        return any(f < 1 for f in self.fractions)

    def at_fraction(self, fraction: float) -> BenchmarkConfig:
        """This config as a cell at `fraction` of the training videos hands its protocol
        (`train_fraction` set; None at 1, so a full cell runs exactly as without `--fractions`)."""
        view = copy.copy(self)
        view.train_fraction = TrainFraction(fraction, self.fraction_seeds) if fraction < 1 else None
        return view

    def task(self, protocol: str, task: str | None = None) -> str:
        """The table's name of a protocol: `cv` becomes `cv-knn` / `cv-linear` (a skill cell's: cv-linear)."""
        if task is not None:
            return table_protocol(get_task(task), protocol, self.cv_protocol)
        return cv_task(self.cv_protocol) if protocol == CV_TASK else protocol

    def table_metrics(self, dataset: DatasetSpec, protocol: str | None = None) -> tuple[str, ...]:
        """The metric columns of `dataset`: `metrics` if set, else its headline metrics; a protocol with
        columns of its own (`Protocol.table_metrics`, e.g. tool presence's mAP) gets those instead."""
        phase = tuple(self.metrics or default_metrics(dataset.adapter))
        known = get_protocol(protocol) if protocol in protocol_names() else None
        return phase if known is None or known.table_metrics is None else known.table_metrics(phase)

    def settings(
        self, model: str, dataset: DatasetSpec, protocol: str, fraction: float = 1.0
    ) -> dict[str, Any]:
        """What a cell's numbers depend on (recorded in its results JSON; a rerun must match it): the
        protocol's own part is `Protocol.settings`; a cell below fraction 1 adds `train_fraction` (the
        fraction and the subset seeds), so it is never taken for a full cell, nor for another fraction's."""
        proto = get_protocol(protocol, "protocols").settings(self)
        extract = {
            "fps": self.extract.fps,
            "precision": self.extract.precision,
            "resize_on_decode": self.extract.resize_on_decode,
            "split": self.extract.split,
            "split_scheme": self.extract.split_scheme,
            "videos": list(self.extract.videos) if self.extract.videos else None,
        }
        if self.extract.decoder != "pyav":  # cells made before decoders were recorded stay valid
            extract["decoder"] = self.extract.decoder
        if self.extract.crop_black_margin:  # likewise cells made before the crop existed
            extract["crop_black_margin"] = True
        settings = {
            "model": model,
            "dataset": dataset.settings(),
            "protocol": protocol,
            "extract": extract,
            **proto,
        }
        if fraction < 1:  # full cells keep the settings they had before `--fractions` existed
            settings["train_fraction"] = {"fraction": fraction, "seeds": list(self.fraction_seeds)}
        return json.loads(json.dumps(settings, sort_keys=True, default=str))  # as it reads back from JSON


def _seeded(config: Any, seed: int) -> Any:
    """A protocol config with its `seed` field set to `seed` (a config without one: as it is)."""
    if dataclasses.is_dataclass(config) and "seed" in {f.name for f in dataclasses.fields(config)}:
        return dataclasses.replace(config, seed=seed)
    return config
