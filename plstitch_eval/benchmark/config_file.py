"""A benchmark config file (`plstitch benchmark --config FILE`, TOML or YAML): each registered protocol's own
settings, in a table under its name (`[protocols.NAME]`), so a new protocol is configured without a flag
or a `BenchmarkConfig` field of its own (docs/benchmark.md). The tables are read by `protocols.settings`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.datasets_file import DATASET_FILE_SUFFIXES, read_table_file
from plstitch_eval.errors import ConfigError
from plstitch_eval.protocols.settings import check_tables, protocol_config

__all__ = ["protocol_config", "read_config_file"]  # protocol_config: `protocols.settings`, its home

CONFIG_FILE_KEYS = ("protocols",)


def read_config_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """The `[protocols.NAME]` tables of a benchmark config file, by protocol name, checked to be tables."""
    path = Path(path).expanduser()
    if path.suffix.lower() not in DATASET_FILE_SUFFIXES or not path.is_file():
        raise ConfigError(f"--config {path}: not an existing .toml/.yaml file.")
    data = read_table_file(path) or {}
    if not isinstance(data, dict) or set(data) - set(CONFIG_FILE_KEYS):
        unknown = sorted(set(data) - set(CONFIG_FILE_KEYS)) if isinstance(data, dict) else []
        raise ConfigError(
            f"--config {path}: holds {', '.join(unknown) or 'no table'}; it takes [protocols.NAME] tables "
            "of each protocol's settings."
        )
    tables = data.get("protocols") or {}
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise ConfigError(f"--config {path}: write each protocol's settings as a table, [protocols.NAME].")
    tables = {str(name): dict(table) for name, table in tables.items()}
    check_tables(tables, f"--config {path}")
    return tables
