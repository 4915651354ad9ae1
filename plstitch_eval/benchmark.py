"""Many encoders x many datasets x several protocols in one resumable run (`plstitch benchmark`).

A *cell* is one (model, dataset, protocol). Every (model, dataset) pair gets one feature store
(`extract_features`, sharded over the ranks under torchrun), which every protocol of the pair reads
(`run_knn`, `run_linear`, `run_cv`). Layout of the output folder::

    <out>/features/<model>/<dataset>/                 feature store, resumable video by video
    <out>/results/<model>/<dataset>/<protocol>.json   plstitch.results/v1 + a "benchmark" key (see below)
    <out>/table.md, <out>/table.json                  rows = models, columns = dataset x protocol x metric,
                                                      the paper's reported numbers beside ours, failed cells

`<model>` is a folder-safe form of the spec, `<dataset>` the dataset's name. A results file's "benchmark" key
records the settings that made it and a digest of its store's manifest: a rerun skips every cell whose file
matches (so it finishes only what is missing), recomputes a cell whose store changed, and refuses (one
`ConfigError`) a file made with other settings unless `overwrite`. A cell that fails (weights not cached, a
corrupt video, out of memory) is recorded with its error and the others go on; the table names it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import gc
import hashlib
import inspect
import json
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from plstitch_eval.data.datasets import dataset_class, get_dataset, list_datasets
from plstitch_eval.errors import ConfigError, PlstitchError
from plstitch_eval.extract import ExtractOptions, extract_features, select_videos
from plstitch_eval.features import FeatureStore, compat_key
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.hub_files import parse_hf_spec
from plstitch_eval.hub.random_init import random_init_source
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.knn import KnnConfig
from plstitch_eval.linear import LinearConfig
from plstitch_eval.protocols import CV_PROTOCOLS, run_cv, run_knn, run_linear
from plstitch_eval.resources import load_paper_results
from plstitch_eval.results_json import TASK_LABELS, TOOLS_TASK, write_results
from plstitch_eval.scoring import default_metrics
from plstitch_eval.tables import METRIC_LABELS
from plstitch_eval.temporal.fit import TemporalConfig
from plstitch_eval.temporal_protocol import run_temporal
from plstitch_eval.tool_presence import MAP, run_tool_linear
from plstitch_eval.utils.console import console, error_console, logger, progress_bar
from plstitch_eval.utils.device import resolve_device
from plstitch_eval.utils.distributed import DistInfo, init_distributed, teardown_distributed
from plstitch_eval.utils.io import write_json_atomic, write_text_atomic

SCHEMA = "plstitch.benchmark/v1"
CELL_SCHEMA = "plstitch.benchmark-cell/v1"
PROTOCOLS = ("knn", "linear", "temporal", "cv", TOOLS_TASK)
PROTOCOL_LABELS = TASK_LABELS
TABLE_MD, TABLE_JSON = "table.md", "table.json"
FEATURES_DIR, RESULTS_DIR = "features", "results"
DATASET_FILE_SUFFIXES = (".toml", ".yaml", ".yml")
DATASET_FILE_KEYS = ("adapter", "root", "split_scheme", "options")
CHECKPOINT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin", ".ckpt")
RUNTIME_FIELDS = ("device", "num_threads", "chunk_size")  # change speed, not numbers: not in the settings
MAX_ERRORS_SHOWN = 3
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# ------------------------------------------------------------------------------------------- collections


@dataclass(frozen=True)
class Collection:
    """A named list of models for `--models`: the methods of one paper table that plstitch can load."""

    name: str
    description: str
    models: tuple[str, ...]  # registry names (entries missing from the registry are left out)
    datasets: tuple[str, ...]  # the adapters the paper evaluates them on
    missing: tuple[str, ...]  # the paper's methods of this table with no loadable checkpoint in plstitch

    def available(self) -> list[str]:
        """The collection's models that the registry holds."""
        return [name for name in self.models if name in MODELS]


COLLECTIONS: dict[str, Collection] = {
    c.name: c
    for c in (
        Collection(
            "paper-surgical",
            "PL-Stitch paper, Table 1 (surgical phase recognition)",
            (
                "pl-stitch-lemon",
                "lemonfm",
                "endovit",
                "dino-vitb16",
                "mae-vitb16",
                "ibot-vitb16",
                "endo-fm",
                "videomaev2-vitb16",
                "t-core-vitb16",
            ),
            ("autolaparo", "cholec80", "m2cai16"),
            (),
        ),
        Collection(
            "paper-cooking",
            "PL-Stitch paper, Table 2 (cooking action segmentation)",
            (
                "pl-stitch-gtea",
                "pl-stitch-breakfast",
                "dino-vitb16",
                "ibot-vitb16",
                "videomaev2-vitb16",
                "t-core-vitb16",
            ),
            ("gtea", "breakfast"),
            (),
        ),
        Collection(
            "2026",
            "Baselines of 2026 beside PL-Stitch: DINOv3, SurgeNetDINO, V-JEPA 2, VideoMAE V2-L",
            (
                "pl-stitch-lemon",
                "dinov3-vitb16",
                "dinov3-vitl16",
                "surgenet-dinov1-vitb16",
                "surgenet-dinov2-vitb14",
                "surgenet-dinov3-vitb16",
                "vjepa2-vitl16",
                "videomaev2-vitl16",
            ),
            ("autolaparo", "cholec80", "m2cai16"),
            (),
        ),
    )
}


# ------------------------------------------------------------------------------------ parsing the inputs


def check_model_spec(spec: str) -> str:
    """`spec` stripped when `load_encoder` could take it; a bare name that is nothing known is a ConfigError.

    Paths are not opened here: a missing checkpoint fails its own cells at run time, not the whole run.
    """
    spec = str(spec).strip()
    if not spec:
        raise ConfigError("--models has an empty item (two commas in a row?); write A,B,... .")
    source = random_init_source(spec)
    if source is not None:
        check_model_spec(source)
        return spec
    if spec in MODELS:
        return spec
    if spec.startswith("hf-hub:"):
        parse_hf_spec(spec)  # ConfigError naming the accepted forms
        return spec
    path = Path(spec).expanduser()
    if "/" in spec or os.sep in spec or spec.startswith(("~", ".")) or path.exists():
        return spec
    if path.suffix.lower() in CHECKPOINT_SUFFIXES:
        return spec
    close = difflib.get_close_matches(spec, [*MODELS, *COLLECTIONS], n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise ConfigError(
        f"Unknown model {spec!r} in --models.{hint} Pass a registry name (`plstitch models`), a collection "
        f"({', '.join(COLLECTIONS)}), hf-hub:ORG/NAME, random-init:SPEC, or a folder or checkpoint path."
    )


def expand_models(models: str | Sequence[str]) -> list[str]:
    """Specs of `--models` (comma list or sequence): collections expanded, each checked, no duplicates."""
    items = _split(models, "--models")
    out: list[str] = []
    for item in items:
        if item in COLLECTIONS:
            collection = COLLECTIONS[item]
            members = collection.available()
            if not members:
                raise ConfigError(f"Collection {item!r} has no model in this registry; list models instead.")
            if collection.missing:
                logger.info(
                    "%s: the paper's %s have no loadable checkpoint in plstitch and are left out.",
                    item,
                    ", ".join(collection.missing),
                )
            out.extend(members)
        else:
            out.append(check_model_spec(item))
    return list(dict.fromkeys(out))


def parse_protocols(protocols: str | Sequence[str]) -> tuple[str, ...]:
    """`knn,linear[,cv]` -> ("knn", "linear", ...); an unknown name is a ConfigError listing the choices."""
    items = _split(protocols, "--protocols")
    for item in items:
        if item not in PROTOCOLS:
            raise ConfigError(
                f"Unknown protocol {item!r} in --protocols; choose from {', '.join(PROTOCOLS)} "
                "(e.g. --protocols knn,linear)."
            )
    return tuple(dict.fromkeys(items))


def parse_metrics(metrics: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """`accuracy,macro_f1_video` -> a tuple of table metrics (None: each dataset's headline metrics)."""
    if metrics is None or (isinstance(metrics, str) and not metrics.strip()):
        return None
    items = _split(metrics, "--metrics")
    for item in items:
        if item not in METRIC_LABELS:
            raise ConfigError(
                f"Unknown metric {item!r} in --metrics; choose from {', '.join(METRIC_LABELS)}."
            )
    return tuple(dict.fromkeys(items))


def _split(value: str | Sequence[str], option: str) -> list[str]:
    """Items of a comma list (or of a sequence of comma lists), stripped; an empty item is a ConfigError."""
    parts = [value] if isinstance(value, str) else list(value)
    items = [item.strip() for part in parts for item in str(part).split(",")]
    if not items or any(not item for item in items):
        raise ConfigError(f"{option} has an empty item (two commas in a row, or nothing at all).")
    return items


@dataclass
class DatasetSpec:
    """One dataset of a benchmark: its name (folder and table column), adapter, root and adapter options."""

    name: str
    adapter: str | None = None  # None: the adapter registered as `name`
    root: str | Path | None = None
    options: dict[str, Any] = field(default_factory=dict)  # adapter options, e.g. n_videos for synthetic
    split_scheme: str | None = None  # the scheme k-NN and linear read (None: the store's default)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ConfigError(
                f"Dataset name {self.name!r} must start with a letter or digit and hold only letters, "
                "digits, '.', '_' or '-' (it names a folder under --out)."
            )
        self.adapter = self.adapter or self.name
        what = repr(self.name) if self.adapter == self.name else f"{self.name!r} (adapter {self.adapter!r})"
        if self.adapter not in list_datasets():
            close = difflib.get_close_matches(self.adapter, list_datasets(), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"Unknown dataset {what}.{hint} Known adapters: {', '.join(list_datasets())} "
                "(`plstitch datasets`); write NAME or NAME=ROOT."
            )
        if not isinstance(self.options, dict):
            raise ConfigError(f"Dataset {what}: options must be a table of adapter options.")
        params = inspect.signature(dataset_class(self.adapter).__init__).parameters
        accepted = [p for p in params if p not in ("self", "root")]
        unknown = sorted(set(self.options) - set(accepted))
        if unknown:
            raise ConfigError(
                f"Dataset {what} does not take option(s) {', '.join(unknown)}; "
                f"it accepts: {', '.join(accepted)}."
            )
        if self.root is None and params["root"].default is inspect.Parameter.empty:
            raise ConfigError(
                f"Dataset {what} needs its folder: write {self.name}=/path/to/{self.adapter} in --datasets "
                'or root = "..." in the datasets file.'
            )
        if self.root is not None:
            self.root = Path(self.root).expanduser()
            if not self.root.is_dir():
                raise ConfigError(
                    f"Dataset {what}: folder {self.root} does not exist; fix the ROOT of {self.name}=ROOT."
                )
        if self.split_scheme is not None and not isinstance(self.split_scheme, str):
            raise ConfigError(
                f"Dataset {what}: split_scheme must be a scheme name, got {self.split_scheme!r}."
            )

    def build(self) -> Any:
        """The dataset adapter (synthetic videos are generated on first use)."""
        return get_dataset(self.adapter, root=self.root, **self.options)

    def settings(self) -> dict[str, Any]:
        """What identifies the dataset in a cell's settings (the root may move; its contents may not)."""
        return {
            "name": self.name,
            "adapter": self.adapter,
            "options": self.options,
            "split_scheme": self.split_scheme,
        }


def parse_datasets(datasets: str | Sequence[str]) -> list[DatasetSpec]:
    """`--datasets`: comma-separated `NAME`, `NAME=ROOT` or a .toml/.yaml file of datasets, in order."""
    specs: list[DatasetSpec] = []
    for item in _split(datasets, "--datasets"):
        if Path(item).suffix.lower() in DATASET_FILE_SUFFIXES:
            specs.extend(read_datasets_file(item))
            continue
        name, eq, root = (part.strip() for part in item.partition("="))
        if not name or (eq and not root):
            raise ConfigError(
                f"--datasets item {item!r} is malformed; write NAME or NAME=ROOT "
                "(e.g. cholec80=/data/cholec80), or name a .toml/.yaml file of datasets."
            )
        specs.append(DatasetSpec(name=name, root=root or None))
    _check_unique([s.name for s in specs], "dataset")
    return specs


def read_datasets_file(path: str | Path) -> list[DatasetSpec]:
    """Datasets of a TOML or YAML file: one table per dataset name with `adapter`, `root` (relative to the
    file), `split_scheme` and adapter options (loose or under `options`); see docs/benchmark.md."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"Datasets file {path} does not exist; pass NAME[=ROOT],... or an existing file.")
    text = path.read_text(encoding="utf-8")
    data = _load_toml(path, text) if path.suffix.lower() == ".toml" else _load_yaml(path, text)
    if isinstance(data, dict) and set(data) == {"datasets"} and isinstance(data["datasets"], dict):
        data = data["datasets"]
    if not isinstance(data, dict) or not data:
        raise ConfigError(
            f'{path}: lists no dataset; write one table per dataset, e.g. [cholec80] root = "...".'
        )
    specs = []
    for name, entry in data.items():
        entry = {} if entry is None else entry
        if not isinstance(entry, dict):
            raise ConfigError(
                f"{path}: dataset {name!r} must be a table of settings (root, adapter, options), "
                f"got {type(entry).__name__}."
            )
        entry = dict(entry)
        adapter, root, scheme = (
            entry.pop("adapter", None),
            entry.pop("root", None),
            entry.pop("split_scheme", None),
        )
        options = entry.pop("options", None) or {}
        if not isinstance(options, dict):
            raise ConfigError(
                f"{path}: dataset {name!r}: options must be a table, got {type(options).__name__}."
            )
        for key, value in (("adapter", adapter), ("root", root)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{path}: dataset {name!r}: {key} must be a string, got {value!r}.")
        if root is not None:
            root = Path(root).expanduser()
            root = root if root.is_absolute() else path.parent / root
        try:
            specs.append(DatasetSpec(str(name), adapter, root, {**options, **entry}, scheme))
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    _check_unique([s.name for s in specs], f"dataset in {path}")
    return specs


def _load_toml(path: Path, text: str) -> Any:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ConfigError(
                f"{path}: reading TOML needs Python 3.11+ or `pip install tomli`; or write the file as YAML."
            ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{path}: invalid TOML: {exc}; fix that line (format: docs/benchmark.md)."
        ) from None


def _load_yaml(path: Path, text: str) -> Any:
    try:
        import yaml
    except ModuleNotFoundError:
        raise ConfigError(
            f"{path}: reading YAML needs PyYAML (`pip install pyyaml`); or write TOML."
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(
            f"{path}: invalid YAML{where}: {problem}; fix that line (docs/benchmark.md)."
        ) from None


def _check_unique(names: Sequence[str], what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"The {what} name {name!r} is given twice; give each dataset its own name.")
        seen.add(name)


def model_dirs(models: Sequence[str]) -> dict[str, str]:
    """A distinct folder name per spec: the spec with unsafe characters as `_` (+ a digest on clashes)."""

    def slug(spec: str) -> str:
        text = re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("._") or "model"
        return text if len(text) <= 80 else f"{text[:70]}-{_digest(spec)[:8]}"

    slugs = {spec: slug(spec) for spec in models}
    counts: dict[str, int] = {}
    for value in slugs.values():
        counts[value] = counts.get(value, 0) + 1
    return {spec: s if counts[s] == 1 else f"{s}-{_digest(spec)[:8]}" for spec, s in slugs.items()}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------------------------- config


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
        _check_unique([d.name for d in self.datasets], "dataset")
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


# ------------------------------------------------------------------------------------------------ cells


@dataclass
class Cell:
    """One (model, dataset, protocol) of the run, with where its files go and how it ended."""

    model: str
    model_dir: str
    dataset: DatasetSpec
    protocol: str
    out: Path
    status: str = "pending"  # pending | done | failed
    resumed: bool = False  # finished by an earlier run
    error: str | None = None
    seconds: float = 0.0
    metrics: dict[str, float | None] = field(default_factory=dict)
    metrics_std: dict[str, float | None] = field(default_factory=dict)

    @property
    def store(self) -> Path:
        """The (model, dataset) feature store, shared by the pair's protocols."""
        return self.out / FEATURES_DIR / self.model_dir / self.dataset.name

    @property
    def results_path(self) -> Path:
        """This cell's results JSON."""
        return self.out / RESULTS_DIR / self.model_dir / self.dataset.name / f"{self.protocol}.json"

    @property
    def name(self) -> str:
        """`model | dataset | protocol`, for status lines and errors."""
        return f"{self.model} | {self.dataset.name} | {self.protocol}"


def plan_cells(config: BenchmarkConfig) -> list[Cell]:
    """Every cell, model-major (then dataset, then protocol): the order they run and appear in."""
    dirs = model_dirs(config.models)
    return [
        Cell(model, dirs[model], dataset, protocol, config.out)
        for model in config.models
        for dataset in config.datasets
        for protocol in config.protocols
    ]


def store_digest(manifest: dict[str, Any]) -> str:
    """Digest of what makes a store's features (compat key, precision, creation time)."""
    key = {
        "compat": compat_key(manifest),
        "precision": manifest.get("precision"),
        "created": manifest.get("created"),
    }
    return _digest(json.dumps(key, sort_keys=True, default=str))


def cell_state(cell: Cell, settings: dict[str, Any]) -> tuple[str, str]:
    """("missing" | "done" | "stale" | "conflict", why) of a cell's results JSON on disk.

    done: made with `settings` from the store as it is now; stale: its store changed since (recompute);
    conflict: made with other settings or not by the benchmark (refused unless overwrite).
    """
    path = cell.results_path
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
        manifest = FeatureStore(cell.store).manifest
    except PlstitchError:
        return "stale", f"its feature store {cell.store} is gone"
    if mark.get("store_sha256") != store_digest(manifest):
        return "stale", f"its feature store {cell.store} changed since it was scored"
    return "done", ""


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


# -------------------------------------------------------------------------------------------- the run


@dataclass
class BenchmarkResult:
    """What a run made: every cell (done or failed), the table (rank 0 only) and its files."""

    out: Path
    cells: list[Cell]
    table: dict[str, Any] | None = None
    markdown: str | None = None
    table_md: Path | None = None
    table_json: Path | None = None
    rank: int = 0

    @property
    def failed(self) -> list[Cell]:
        """Cells that ended with an error."""
        return [c for c in self.cells if c.status == "failed"]

    @property
    def ok(self) -> bool:
        """True when every cell finished."""
        return not self.failed


def run_benchmark(
    config: BenchmarkConfig, *, on_cell_done: Callable[[Cell], None] | None = None
) -> BenchmarkResult:
    """Run every missing cell of `config` into `config.out`, then write the table (markdown + JSON).

    Finished cells are skipped (their model is not even loaded when the whole pair is done). A failing cell is
    recorded and the others go on. Under torchrun every rank extracts its share of each store and rank 0 runs
    the protocols and writes the results; only rank 0 returns the table. `on_cell_done` is called on rank 0
    after each cell ends (tests use it to interrupt a run).
    """
    _check_out_dir(config.out)
    cells = plan_cells(config)
    states = {id(c): cell_state(c, config.settings(c.model, c.dataset, c.protocol)) for c in cells}
    conflicts = [(c, why) for c in cells for state, why in [states[id(c)]] if state == "conflict"]
    if conflicts and not config.overwrite:
        cell, why = conflicts[0]
        more = f" ({len(conflicts)} results files in all)" if len(conflicts) > 1 else ""
        raise ConfigError(
            f"{cell.results_path} {why}{more}; rerun with the options it was made with, choose another "
            "--out, or pass --overwrite to recompute it."
        )
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
    table = benchmark_table(config, cells)
    markdown = table_markdown(table)
    write_json_atomic(config.out / TABLE_JSON, table)
    write_text_atomic(config.out / TABLE_MD, markdown)
    return BenchmarkResult(
        config.out, cells, table, markdown, config.out / TABLE_MD, config.out / TABLE_JSON, info.rank
    )


def _check_out_dir(out: Path) -> None:
    """Refuse an output folder that exists and holds something other than a benchmark."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; choose a new or empty folder.")
    if out.is_dir() and any(out.iterdir()):
        ours = (FEATURES_DIR, RESULTS_DIR, TABLE_JSON, TABLE_MD)
        if not any((out / name).exists() for name in ours):
            raise ConfigError(
                f"--out {out} is not empty and holds no benchmark ({', '.join(ours)}); choose a new or "
                "empty folder."
            )


class _Runner:
    """Walks the cells model by model: load once, extract each pair's store once, run its protocols."""

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
            for model in self.config.models:
                self._run_model(model)

    def _run_model(self, model: str) -> None:
        pairs = [
            (dataset, pending)
            for dataset in self.config.datasets
            for pending in [[c for c in self._cells_of(model, dataset) if c.status == "pending"]]
            if pending
        ]
        if not pairs:
            return
        encoder, error = None, None
        try:
            encoder = load_encoder(model, device=str(self.device), trust_pickle=self.config.trust_pickle)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # weights not cached, bad checkpoint, ...: this model's cells fail
            error = f"load model: {describe_error(exc)}"
        error = self._agree(error)
        for dataset, pending in pairs:
            if error is None:
                pair_error = self._extract(encoder, model, dataset, pending[0])
                if pair_error is not None:
                    for cell in pending:
                        self._fail(cell, pair_error)
                    continue
                for cell in pending:
                    if self.info.is_main:
                        self._score(cell)
            else:
                for cell in pending:
                    self._fail(cell, error)
        del encoder
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

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

    def _extract(self, encoder: Any, model: str, dataset: DatasetSpec, cell: Cell) -> str | None:
        """Create or resume the pair's store; the error that fails the pair's cells, else None."""
        adapter, error = self._adapter(dataset)
        if error is not None:
            return error
        store = FeatureStore(cell.store)
        try:
            records = select_videos(
                adapter, self.options.split, self.options.videos, self.options.split_scheme
            )
            mine = records[self.info.rank :: self.info.world_size]
            done = sum(store.has(r.name) and store.check(r.name) is None for r in mine)  # damaged: redone
            sub = self.bar.add_task(f"extract {model} | {dataset.name}", total=len(mine), completed=done)
            try:
                summary = extract_features(
                    adapter, encoder, cell.store, self.options, on_video_done=lambda _r: self.bar.advance(sub)
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
        if summary.failed:
            shown = "; ".join(f"{r.video}: {r.error}" for r in summary.failed[:MAX_ERRORS_SHOWN])
            more = " ..." if len(summary.failed) > MAX_ERRORS_SHOWN else ""
            return (
                f"extract: {len(summary.failed)} of {len(summary.results)} video(s) failed ({shown}{more}); "
                f"the others are in {cell.store}"
            )
        return None

    def _score(self, cell: Cell) -> None:
        """Run the cell's protocol on its store and write its results JSON (rank 0)."""
        start = time.perf_counter()
        try:
            results = self._protocol(cell)
            results["benchmark"] = {
                "schema": CELL_SCHEMA,
                "model": cell.model,
                "dataset": cell.dataset.name,
                "protocol": cell.protocol,
                "settings": self.config.settings(cell.model, cell.dataset, cell.protocol),
                "store_sha256": store_digest(FeatureStore(cell.store).manifest),
            }
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
        config, scheme = self.config, cell.dataset.split_scheme
        if cell.protocol == "knn":
            return run_knn(cell.store, config.knn, scheme=scheme)
        if cell.protocol == "linear":
            return run_linear(cell.store, config.linear, scheme=scheme, val_fraction=config.val_fraction)
        if cell.protocol == TOOLS_TASK:
            balanced = dataclasses.replace(config.linear, balance_classes=True)
            return run_tool_linear(cell.store, balanced, scheme=scheme, val_fraction=config.val_fraction)
        if cell.protocol == "temporal":
            return run_temporal(
                cell.store, config.temporal, scheme=scheme, val_fraction=config.val_fraction, progress=False
            )[0]
        return run_cv(
            cell.store,
            config.cv_folds,
            config.cv_protocol,
            config.knn,
            config.linear,
            seed=config.cv_seed,
            val_fraction=config.val_fraction,
            temporal_config=config.temporal,
        )

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
        else:
            metrics = self.config.table_metrics(cell.dataset, cell.protocol)
            numbers = ", ".join(f"{METRIC_LABELS.get(m, m)} {_fmt(cell.metrics.get(m))}" for m in metrics)
            how = "(finished earlier)" if cell.resumed else f"({cell.seconds:.1f} s)"
            label = "skipped" if cell.resumed else "done   "
            console.print(f"{prefix} {label}  {cell.name}: {numbers} {how}", highlight=False, soft_wrap=True)
        if self.on_cell_done is not None:
            self.on_cell_done(cell)


def describe_error(exc: BaseException) -> str:
    """One line naming the error: ours by their message, others with their type (e.g. OutOfMemoryError)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if isinstance(exc, PlstitchError) else f"{type(exc).__name__}: {text}"


def _fmt(value: Any, std: Any = None) -> str:
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "-"
    return f"{value:.1f}" if std is None or not math.isfinite(std) else f"{value:.1f} ± {std:.1f}"


# ---------------------------------------------------------------------------------------- paper numbers

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


# ------------------------------------------------------------------------------------------------ table


def benchmark_table(config: BenchmarkConfig, cells: Sequence[Cell]) -> dict[str, Any]:
    """The table as JSON (`plstitch.benchmark/v1`): columns, one record per cell (numbers, paper, error)."""
    columns = [
        {
            "dataset": dataset.name,
            "protocol": protocol,
            "task": config.task(protocol),
            "metric": metric,
            "header": " ".join(
                (dataset.name, PROTOCOL_LABELS[config.task(protocol)], METRIC_LABELS.get(metric, metric))
            ),
        }
        for dataset in config.datasets
        for protocol in config.protocols
        for metric in config.table_metrics(dataset, protocol)
    ]
    records = []
    for cell in cells:
        done = cell.status == "done"
        records.append(
            {
                "model": cell.model,
                "model_dir": cell.model_dir,
                "dataset": cell.dataset.name,
                "adapter": cell.dataset.adapter,
                "protocol": cell.protocol,
                "task": config.task(cell.protocol),
                "status": cell.status,
                "resumed": cell.resumed,
                "error": cell.error,
                "features": str(cell.store),
                "results": str(cell.results_path) if done else None,
                "metrics": cell.metrics if done else {},
                "metrics_std": cell.metrics_std if done else {},
                "paper": paper_numbers(cell.model, cell.dataset.adapter or "", cell.protocol),
                "seconds": cell.seconds,
            }
        )
    missing = sorted(
        {m for c in COLLECTIONS.values() if set(c.available()) & set(config.models) for m in c.missing}
    )
    failed = [r for r in records if r["status"] == "failed"]
    return {
        "schema": SCHEMA,
        "out": str(config.out),
        "models": list(config.models),
        "datasets": [{**d.settings(), "root": str(d.root) if d.root else None} for d in config.datasets],
        "protocols": list(config.protocols),
        "columns": columns,
        "cells": records,
        "ok": not failed,
        "failed": [{k: r[k] for k in ("model", "dataset", "protocol", "error")} for r in failed],
        "paper": {
            "source": paper_results().get("source"),
            "methods_without_a_loadable_checkpoint": missing,
        },
    }


def table_markdown(table: dict[str, Any]) -> str:
    """The table in markdown: ours with the paper's number in parentheses; failed cells listed with errors."""
    columns, by_key = table["columns"], {}
    for record in table["cells"]:
        by_key[(record["model"], record["dataset"], record["protocol"])] = record
    best = {}
    for i, col in enumerate(columns):
        values = [
            r["metrics"].get(col["metric"])
            for r in table["cells"]
            if (r["dataset"], r["protocol"]) == (col["dataset"], col["protocol"]) and r["status"] == "done"
        ]
        values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
        best[i] = max(values) if len(values) > 1 else None
    lines = [
        "| Model | " + " | ".join(_md(c["header"]) for c in columns) + " |",
        "| --- |" + " ---: |" * len(columns),
    ]
    any_paper = other_checkpoint = False
    for model in table["models"]:
        cells = []
        for i, col in enumerate(columns):
            record = by_key.get((model, col["dataset"], col["protocol"]))
            if record is None:
                cells.append("-")
                continue
            if record["status"] != "done":
                cells.append("failed" if record["status"] == "failed" else "-")
                continue
            value = record["metrics"].get(col["metric"])
            text = _fmt(value, record["metrics_std"].get(col["metric"]))
            if best[i] is not None and value == best[i]:
                text = f"**{text}**"
            paper = (record.get("paper") or {}).get("metrics", {}).get(col["metric"])
            if paper is not None:
                any_paper = True
                mark = "" if record["paper"]["same_checkpoint"] else "†"
                other_checkpoint = other_checkpoint or bool(mark)
                text += f" ({paper:.1f}{mark})"
            cells.append(text)
        lines.append(f"| {_md(model)} | " + " | ".join(cells) + " |")
    notes = ["", "Ours in % on each dataset's test split; the best of a column in bold."]
    if any_paper:
        notes.append(
            "(x) = reported by the PL-Stitch paper (CVPR 2026, Tables 1-2) for this checkpoint on this "
            "dataset"
            + (
                "; (x†) = reported for the same method pretrained by the paper's authors on other data, "
                "not for this checkpoint."
                if other_checkpoint
                else "."
            )
        )
    missing = table["paper"]["methods_without_a_loadable_checkpoint"]
    if missing:
        notes.append(f"The paper also reports {', '.join(missing)}: no loadable checkpoint in plstitch.")
    failed = table["failed"]
    if failed:
        groups: dict[tuple[str, str, str], list[str]] = {}  # one row per (model, dataset, error)
        for f in failed:
            groups.setdefault((f["model"], f["dataset"], f["error"] or ""), []).append(f["protocol"])
        notes += ["", f"Failed cells ({len(failed)}; rerun the same command to retry them):", ""]
        notes += ["| Model | Dataset | Protocols | Error |", "| --- | --- | --- | --- |"]
        notes += [
            f"| {_md(model)} | {_md(dataset)} | {', '.join(protocols)} | {_md(error)} |"
            for (model, dataset, error), protocols in groups.items()
        ]
    return "\n".join(lines + notes) + "\n"


def _md(text: str) -> str:
    """A markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


__all__ = [
    "COLLECTIONS",
    "BenchmarkConfig",
    "BenchmarkResult",
    "Cell",
    "Collection",
    "DatasetSpec",
    "benchmark_table",
    "cell_state",
    "check_model_spec",
    "expand_models",
    "paper_numbers",
    "parse_datasets",
    "parse_metrics",
    "parse_protocols",
    "plan_cells",
    "read_datasets_file",
    "run_benchmark",
    "table_markdown",
]
