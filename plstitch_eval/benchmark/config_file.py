"""A benchmark config file (`plstitch benchmark --config FILE`, TOML or YAML): each registered protocol's own
settings, in a table under its name (`[protocols.NAME]`), so a new protocol is configured without a flag
or a `BenchmarkConfig` field of its own (docs/benchmark.md). The tables are read by `protocols.settings`.
A `[slurm]` table holds the Slurm jobs' settings of `--executor slurm` (`cluster.SlurmSettings`,
docs/cluster.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.datasets_file import DATASET_FILE_SUFFIXES, read_table_file
from plstitch_eval.errors import ConfigError
from plstitch_eval.protocols.settings import check_tables, protocol_config

__all__ = ["protocol_config", "read_config_file", "read_slurm_table"]  # protocol_config: its home is settings

CONFIG_FILE_KEYS = ("protocols", "slurm")


def read_config_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """The `[protocols.NAME]` tables of a benchmark config file, by protocol name, checked to be tables."""
    path = Path(path).expanduser()
    data = _read(path)
    tables = data.get("protocols") or {}
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise ConfigError(f"--config {path}: write each protocol's settings as a table, [protocols.NAME].")
    tables = {str(name): dict(table) for name, table in tables.items()}
    check_tables(tables, f"--config {path}")
    return tables


def read_slurm_table(path: str | Path) -> dict[str, Any]:
    """The `[slurm]` table of a benchmark config file ({} without one); its keys are checked by
    `cluster.slurm_settings`."""
    path = Path(path).expanduser()
    table = _read(path).get("slurm") or {}
    if not isinstance(table, dict):
        raise ConfigError(f"--config {path}: write the Slurm settings as a table, [slurm].")
    return dict(table)


def _read(path: Path) -> dict[str, Any]:
    """What the config file holds, checked to be tables of the known names only."""
    if path.suffix.lower() not in DATASET_FILE_SUFFIXES or not path.is_file():
        raise ConfigError(f"--config {path}: not an existing .toml/.yaml file.")
    data = read_table_file(path) or {}
    if not isinstance(data, dict) or set(data) - set(CONFIG_FILE_KEYS):
        unknown = sorted(set(data) - set(CONFIG_FILE_KEYS)) if isinstance(data, dict) else []
        raise ConfigError(
            f"--config {path}: holds {', '.join(unknown) or 'no table'}; it takes [protocols.NAME] tables "
            "of each protocol's settings and a [slurm] table (docs/cluster.md)."
        )
    return data
