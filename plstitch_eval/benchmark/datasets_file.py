"""The datasets of a benchmark: `DatasetSpec` (name, adapter, root, options), read from `--datasets` items or
from a TOML/YAML datasets file (docs/benchmark.md), each checked against its adapter before anything runs."""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.inputs import split_items
from plstitch_eval.data.datasets import dataset_class, get_dataset, list_datasets
from plstitch_eval.errors import ConfigError

DATASET_FILE_SUFFIXES = (".toml", ".yaml", ".yml")
DATASET_FILE_KEYS = ("adapter", "root", "split_scheme", "frames", "options")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class DatasetSpec:
    """One dataset of a benchmark: its name (folder and table column), adapter, root and adapter options."""

    name: str
    adapter: str | None = None  # None: the adapter registered as `name`
    root: str | Path | None = None
    options: dict[str, Any] = field(default_factory=dict)  # adapter options, e.g. n_videos for synthetic
    split_scheme: str | None = None  # the scheme k-NN and linear read (None: the store's default)
    frames: str | Path | None = None  # a frame cache (`write-lmdb --eval-frames`) read instead of the videos

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
        if self.frames is not None:
            self.frames = Path(self.frames).expanduser()
            if not self.frames.exists():
                raise ConfigError(
                    f"Dataset {what}: frame cache {self.frames} does not exist; write it with plstitch "
                    f"write-lmdb --dataset {self.adapter} --eval-frames --out {self.frames}, or drop frames."
                )

    def build(self) -> Any:
        """The dataset adapter (synthetic videos are generated on first use)."""
        return get_dataset(self.adapter, root=self.root, **self.options)

    def settings(self) -> dict[str, Any]:
        """What identifies the dataset in a cell's settings (the root may move; its contents may not)."""
        from plstitch_eval.data.frames_lmdb import cache_kind  # lmdb and torchvision: only with a cache

        # the cache's kind (jpeg-lmdb or lossless png-lmdb), not its path, which may move
        frames = {"frames": cache_kind(self.frames)} if self.frames is not None else {}
        return {
            "name": self.name,
            "adapter": self.adapter,
            "options": self.options,
            "split_scheme": self.split_scheme,
            **frames,
        }


def parse_datasets(datasets: str | Sequence[str]) -> list[DatasetSpec]:
    """`--datasets`: comma-separated `NAME`, `NAME=ROOT` or a .toml/.yaml file of datasets, in order."""
    specs: list[DatasetSpec] = []
    for item in split_items(datasets, "--datasets"):
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
    check_unique_names([s.name for s in specs], "dataset")
    return specs


def read_datasets_file(path: str | Path) -> list[DatasetSpec]:
    """Datasets of a TOML or YAML file: one table per dataset name with `adapter`, `root` (relative to the
    file), `split_scheme`, `frames` (a frame cache, relative to the file) and adapter options (loose or under
    `options`); see docs/benchmark.md."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"Datasets file {path} does not exist; pass NAME[=ROOT],... or an existing file.")
    data = read_table_file(path)
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
        adapter, root, scheme, frames = (
            entry.pop("adapter", None),
            entry.pop("root", None),
            entry.pop("split_scheme", None),
            entry.pop("frames", None),
        )
        options = entry.pop("options", None) or {}
        if not isinstance(options, dict):
            raise ConfigError(
                f"{path}: dataset {name!r}: options must be a table, got {type(options).__name__}."
            )
        for key, value in (("adapter", adapter), ("root", root), ("frames", frames)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{path}: dataset {name!r}: {key} must be a string, got {value!r}.")
        root, frames = (_relative_to(path, value) for value in (root, frames))
        try:
            specs.append(DatasetSpec(str(name), adapter, root, {**options, **entry}, scheme, frames))
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    check_unique_names([s.name for s in specs], f"dataset in {path}")
    return specs


def read_table_file(path: Path) -> Any:
    """What a TOML or YAML file (by its suffix) holds; one-line `ConfigError`s for what cannot be read."""
    text = path.read_text(encoding="utf-8")
    return _load_toml(path, text) if path.suffix.lower() == ".toml" else _load_yaml(path, text)


def _relative_to(file: Path, value: str | None) -> Path | None:
    """A path written in a datasets file: absolute, or relative to the file's folder."""
    if value is None:
        return None
    resolved = Path(value).expanduser()
    return resolved if resolved.is_absolute() else file.parent / resolved


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


def check_unique_names(names: Sequence[str], what: str) -> None:
    """A ConfigError naming the first dataset name given twice (`what`: where, e.g. "dataset in FILE")."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"The {what} name {name!r} is given twice; give each dataset its own name.")
        seen.add(name)
