"""A benchmark config file (`plstitch benchmark --config FILE`, TOML or YAML): each registered protocol's own
settings, in a table under its name (`[protocols.NAME]`), so a new protocol is configured without a flag
or a `BenchmarkConfig` field of its own (docs/benchmark.md)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from plstitch_eval.benchmark.datasets_file import DATASET_FILE_SUFFIXES, read_table_file
from plstitch_eval.errors import ConfigError
from plstitch_eval.protocols import get_protocol, protocol_names

__all__ = ["protocol_config", "read_config_file"]

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
    return {str(name): dict(table) for name, table in tables.items()}


def protocol_config(name: str, value: Any) -> Any:
    """The config of registered protocol `name` from a table of its fields (or its config object itself).

    Why here: a protocol with a `BenchmarkConfig` field of its own (`Protocol.section`: knn, linear,
    temporal, linear-tools) is set by that field and its flags; every other protocol by this table.
    """
    if name not in protocol_names():
        raise ConfigError(
            f"[protocols.{name}]: no protocol {name!r} is registered; known: {', '.join(protocol_names())}."
        )
    protocol = get_protocol(name)
    if protocol.section is not None:
        raise ConfigError(
            f"[protocols.{name}]: {name}'s settings are BenchmarkConfig.{protocol.section}, set by the "
            "`plstitch benchmark` flags; a config file sets those of protocols without flags."
        )
    kind = protocol.config_type
    if kind is None:
        raise ConfigError(f"[protocols.{name}]: protocol {name!r} takes no settings; remove the table.")
    if isinstance(value, kind):
        return value
    if not isinstance(value, dict):
        raise ConfigError(f"[protocols.{name}]: must be a table of {kind.__name__} fields.")
    if dataclasses.is_dataclass(kind):
        accepted = [f.name for f in dataclasses.fields(kind)]
        unknown = sorted(set(value) - set(accepted))
        if unknown:
            raise ConfigError(
                f"[protocols.{name}]: unknown setting(s) {', '.join(unknown)}; "
                f"it takes: {', '.join(accepted)}."
            )
    return kind(**value)
