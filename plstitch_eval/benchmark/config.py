"""`BenchmarkConfig`: the models x datasets x protocols of one run and each step's config, checked up front,
and the settings a cell's numbers depend on (what a rerun must match)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.datasets_file import DatasetSpec, check_unique_names, parse_datasets
from plstitch_eval.benchmark.inputs import parse_metrics, parse_protocols
from plstitch_eval.benchmark.models import expand_models
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import ExtractOptions
from plstitch_eval.knn import KnnConfig
from plstitch_eval.linear import LinearConfig
from plstitch_eval.protocols import CV_PROTOCOLS
from plstitch_eval.results_json import TOOLS_TASK
from plstitch_eval.scoring import default_metrics
from plstitch_eval.temporal.fit import TemporalConfig
from plstitch_eval.tool_presence import MAP

RUNTIME_FIELDS = ("device", "num_threads", "chunk_size")  # change speed, not numbers: not in the settings


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
    val_fraction: float = 0.2  # linear / temporal: training videos held out when the store has no val split
    cv_folds: int = 5
    cv_protocol: str = "knn"  # the protocol cross-validated by `cv`
    cv_seed: int = 0
    metrics: str | Sequence[str] | None = None  # table columns; None: each dataset's headline metrics
    overwrite: bool = False  # recompute cells made with other settings, replace stores made differently
    trust_pickle: bool = False
    progress: bool = True

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
        configs = (("extract", ExtractOptions), ("knn", KnnConfig), ("linear", LinearConfig))
        for name, kind in (*configs, ("temporal", TemporalConfig)):
            if not isinstance(getattr(self, name), kind):
                raise ConfigError(f"BenchmarkConfig.{name} must be a {kind.__name__}.")
        if self.cv_protocol not in CV_PROTOCOLS:
            raise ConfigError(
                f"--cv-protocol must be one of {', '.join(CV_PROTOCOLS)}, got {self.cv_protocol!r}."
            )
        if self.cv_folds < 2:
            raise ConfigError(f"--folds must be >= 2, got {self.cv_folds}.")
        if not 0 < self.val_fraction < 1:
            raise ConfigError(f"--val-fraction must be between 0 and 1, got {self.val_fraction}.")

    def task(self, protocol: str) -> str:
        """The table's name of a protocol: `cv` becomes `cv-knn` / `cv-linear`."""
        return f"cv-{self.cv_protocol}" if protocol == "cv" else protocol

    def table_metrics(self, dataset: DatasetSpec, protocol: str | None = None) -> tuple[str, ...]:
        """The metric columns of `dataset`: `metrics` if set, else its headline metrics; the tool task's
        column is its mAP whatever `metrics` says (its results have no phase metrics)."""
        if protocol == TOOLS_TASK:
            return (MAP,)
        return tuple(self.metrics or default_metrics(dataset.adapter))

    def settings(self, model: str, dataset: DatasetSpec, protocol: str) -> dict[str, Any]:
        """What a cell's numbers depend on (recorded in its results JSON; a rerun must match it)."""
        knn = {k: v for k, v in asdict(self.knn).items() if k not in RUNTIME_FIELDS}
        linear = {k: v for k, v in asdict(self.linear).items() if k not in RUNTIME_FIELDS}
        temporal = {k: v for k, v in asdict(self.temporal).items() if k not in RUNTIME_FIELDS}
        inners = {"knn": knn, "linear": linear, "temporal": temporal}
        if protocol == "knn":
            proto: dict[str, Any] = {"knn": knn}
        elif protocol in ("linear", "temporal"):
            proto = {protocol: inners[protocol], "val_fraction": self.val_fraction}
        elif protocol == TOOLS_TASK:  # the linear grid, class-balanced per tool
            proto = {"linear": {**linear, "balance_classes": True}, "val_fraction": self.val_fraction}
        else:
            inner = {self.cv_protocol: inners[self.cv_protocol]}
            proto = {"folds": self.cv_folds, "inner": self.cv_protocol, "seed": self.cv_seed, **inner}
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
        return json.loads(json.dumps(settings, sort_keys=True, default=str))  # as it reads back from JSON
