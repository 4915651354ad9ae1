"""A protocol's settings from outside the code: its config dataclass is its option group.

Every registered protocol is set the same way, shipped or a plugin: a `[protocols.NAME]` table of its config's
fields (`plstitch benchmark --config FILE`) and `--set NAME.FIELD=VALUE` items (`benchmark`, `cv`), so a new
protocol needs no flag or command edit. `plstitch protocols` lists each one's fields and defaults.
Precedence: the dataclass defaults, then the file's table, then `--set`, then a shipped protocol's own flags.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_eval.protocols.registry import (
    PROTOCOLS,
    RUNTIME_FIELDS,
    Protocol,
    cv_protocols,
    get_protocol,
    protocol_names,
    registered_protocols,
)

__all__ = [
    "apply_table",
    "check_tables",
    "cv_config",
    "default_config",
    "describe_protocols",
    "merge_tables",
    "parse_set_items",
    "protocol_config",
    "section_configs",
    "section_table",
    "table_device",
    "unsectioned_tables",
]

Tables = dict[str, dict[str, Any]]  # protocol name -> {config field: value}


def parse_set_items(items: Iterable[str], protocol: str | None = None, option: str = "--set") -> Tables:
    """`NAME.FIELD=VALUE` items as {protocol: {field: value}}; VALUE read as JSON when it parses, else text.

    With `protocol` (`plstitch cv`: one protocol runs), a bare `FIELD=VALUE` is that protocol's. A field given
    twice is refused; names are checked against the registry here, fields when the config is built.
    """
    tables: Tables = {}
    for item in items:
        key, sep, text = item.partition("=")
        name, dot, field = key.strip().rpartition(".")
        if not dot and protocol is not None:
            name = protocol
        if not sep or not name or not field:
            raise ConfigError(
                f"{option} {item!r}: expected PROTOCOL.FIELD=VALUE, e.g. {option} knn.k=10 "
                "(`plstitch protocols` lists each protocol's fields)."
            )
        table = tables.setdefault(name, {})
        if field in table:
            raise ConfigError(f"{option} {item!r}: {name}.{field} is given twice; give each setting once.")
        try:
            table[field] = json.loads(text)
        except json.JSONDecodeError:
            table[field] = text
    check_tables(tables, option)
    return tables


def check_tables(tables: Mapping[str, Mapping[str, Any]], source: str) -> None:
    """Refuse, naming `source` (`--config FILE`, `--set`), a protocol that is not registered, one that takes
    no settings, and a field its config does not have; values are checked by the config itself when built."""
    for name, table in tables.items():
        where = f"{source} [protocols.{name}]" if source.startswith("--config") else f"{source} {name}"
        _check_table(name, table, where)


def _registered(name: str, where: str) -> Protocol:
    """The protocol registered as `name`, else a one-line ConfigError at `where` naming the known ones."""
    if name not in protocol_names():
        raise ConfigError(
            f"{where}: no protocol {name!r} is registered; known: {', '.join(protocol_names())}."
        )
    return get_protocol(name)


def _check_table(name: str, table: Mapping[str, Any], where: str) -> None:
    """The checks of one table: a registered protocol with settings, and fields its config has."""
    kind = _registered(name, where).config_type
    if kind is None:
        raise ConfigError(f"{where}: protocol {name!r} takes no settings; remove them.")
    if dataclasses.is_dataclass(kind):
        accepted = [f.name for f in dataclasses.fields(kind)]
        unknown = sorted(set(table) - set(accepted))
        if unknown:
            raise ConfigError(
                f"{where}: unknown setting(s) {', '.join(unknown)}; {kind.__name__} takes: "
                f"{', '.join(accepted)}."
            )


def merge_tables(*layers: Mapping[str, Mapping[str, Any]]) -> Tables:
    """The tables of several sources merged field by field, a later source winning (file, then `--set`)."""
    merged: Tables = {}
    for layer in layers:
        for name, table in layer.items():
            merged.setdefault(name, {}).update(table)
    return merged


def apply_table(protocol: Protocol, table: Mapping[str, Any], base: Any = None) -> Any:
    """`protocol`'s config with `table`'s fields set over `base` (None: the config's defaults).

    Unknown fields are one line naming the accepted ones; a list given for a tuple field becomes a tuple (TOML
    and JSON have no tuples), so equal settings compare equal; the config checks its values itself.
    """
    where = f"[protocols.{protocol.name}]"
    _check_table(protocol.name, table, where)
    kind = protocol.config_type
    if not dataclasses.is_dataclass(kind):
        return kind(**table)
    start = base if base is not None else kind()
    values = {
        name: tuple(value) if isinstance(value, list) and isinstance(getattr(start, name), tuple) else value
        for name, value in table.items()
    }
    try:
        return dataclasses.replace(start, **values)
    except TypeError as exc:  # a value the dataclass cannot take at all (its own checks raise ConfigError)
        raise ConfigError(f"{where}: {exc}.") from exc


def protocol_config(name: str, value: Any) -> Any:
    """The config of a registered protocol without a `BenchmarkConfig` field of its own, from a table of its
    fields (or its config object itself): what `BenchmarkConfig.protocol_configs` holds.

    Why refused for one with a field (`Protocol.section`: knn, linear, temporal, linear-tools): that field is
    its config; the CLI folds a file's or `--set`'s table into it (`section_table`).
    """
    protocol = _registered(name, f"[protocols.{name}]")
    if protocol.section is not None:
        raise ConfigError(
            f"[protocols.{name}]: {name}'s settings are BenchmarkConfig.{protocol.section}; set that field "
            "(the `plstitch benchmark` flags, --config and --set fold into it)."
        )
    if protocol.config_type is not None and isinstance(value, protocol.config_type):
        return value
    if not isinstance(value, Mapping):
        kind = protocol.config_type.__name__ if protocol.config_type is not None else "settings"
        raise ConfigError(f"[protocols.{name}]: must be a table of {kind} fields.")
    return apply_table(protocol, value)


def section_table(tables: Mapping[str, Mapping[str, Any]], section: str) -> dict[str, Any]:
    """The fields set for `BenchmarkConfig.<section>` by the tables of the protocols sharing it.

    Why: linear-tools runs with the linear probe's config, so `[protocols.linear-tools]` sets the same
    section as `[protocols.linear]`; the two may not disagree on a field.
    """
    merged: dict[str, Any] = {}
    owners: dict[str, str] = {}
    for protocol in registered_protocols():
        if protocol.section != section or protocol.name not in tables:
            continue
        for field, value in tables[protocol.name].items():
            if field in merged and merged[field] != value:
                raise ConfigError(
                    f"[protocols.{protocol.name}] {field} = {value!r} disagrees with "
                    f"[protocols.{owners[field]}] {field} = {merged[field]!r}; both set "
                    f"BenchmarkConfig.{section}: give it once."
                )
            merged[field], owners[field] = value, protocol.name
    return merged


def table_device(tables: Mapping[str, Mapping[str, Any]], section: str, flag: str | None) -> str:
    """The device a section's protocols run on: the `--device` flag when given, else the tables' `device`
    field (`--set knn.device=cuda`), else `auto`. Why: a flag left at its default must not undo `--set`."""
    return flag or section_table(tables, section).get("device") or "auto"


def section_configs(tables: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Each `BenchmarkConfig` section's config (knn, linear, temporal) with the tables' fields set over its
    defaults: the base a command's own flags are then applied to."""
    configs: dict[str, Any] = {}
    for protocol in registered_protocols():
        if protocol.section is not None and protocol.section not in configs:
            configs[protocol.section] = apply_table(protocol, section_table(tables, protocol.section))
    return configs


def cv_config(protocol: str, tables: Mapping[str, Mapping[str, Any]], seed: int) -> Any:
    """`plstitch cv`'s config of an inner protocol without a section (a plugin's): its `--set` fields over its
    default config seeded with the CV seed; None for knn, linear, temporal (their flags build theirs)."""
    inner = get_protocol(protocol, "protocol", cv_protocols())
    others = sorted(set(tables) - {protocol})
    if others:
        raise ConfigError(
            f"--set names {', '.join(others)}; `plstitch cv` runs --protocol {protocol}: set its fields only."
        )
    if inner.section is not None:
        return None
    return apply_table(inner, tables.get(protocol, {}), base=default_config(inner, seed))


def default_config(protocol: Protocol, seed: int) -> Any:
    """A protocol's default config, seeded with `seed` when it has a seed field (CV's inner protocol)."""
    if protocol.config_type is None:
        return None
    seeded = "seed" in {f.name for f in dataclasses.fields(protocol.config_type)}
    return protocol.config_type(seed=seed) if seeded else protocol.config_type()


def unsectioned_tables(tables: Mapping[str, Mapping[str, Any]]) -> Tables:
    """The tables of the protocols without a `BenchmarkConfig` field (`BenchmarkConfig.protocol_configs`)."""
    return {name: dict(t) for name, t in tables.items() if get_protocol(name).section is None}


def describe_protocols() -> list[dict[str, Any]]:
    """Each registered protocol: name, label, where it runs, and its settings with their defaults (the rows of
    `plstitch protocols`; fields that change speed only are marked runtime)."""
    rows: list[dict[str, Any]] = []
    for protocol in registered_protocols():
        settings = []
        kind = protocol.config_type
        same = [r["name"] for r in rows if protocol.section and r["section"] == protocol.section]
        shares = same[0] if same else None
        if kind is not None and dataclasses.is_dataclass(kind) and shares is None:
            default = kind()
            for field in dataclasses.fields(kind):
                value = getattr(default, field.name)
                row = {
                    "name": field.name,
                    "default": list(value) if isinstance(value, tuple) else value,
                    "runtime": field.name in RUNTIME_FIELDS,
                }
                if "choices" in field.metadata:  # a text setting's accepted values (its config checks them)
                    row["choices"] = list(field.metadata["choices"])
                settings.append(row)
        rows.append(
            {
                "name": protocol.name,
                "package": PROTOCOLS.package(protocol.name),  # plstitch, or the plugin's distribution
                "label": protocol.label,
                "title": protocol.title,
                "config": kind.__name__ if kind is not None else None,
                "section": protocol.section,
                "shares_settings_of": shares,  # the same config section as that protocol (set either name)
                "benchmark": protocol.run is not None,
                "cv": protocol.cv is not None,
                "probe_kind": protocol.probe_kind,
                "settings": settings,
            }
        )
    return rows
