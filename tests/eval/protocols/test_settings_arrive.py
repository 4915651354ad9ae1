"""Every setting of every registered protocol reaches its run (issue 54, item 2).

Generated from the registry and each config dataclass's fields, so a new protocol or field is covered when it
is added: a value other than the default, given as `--set`, in a `--config` table and (where the command has
one) as a flag, is recorded in the results JSON of `plstitch cv` and of every `plstitch benchmark` cell
(the cv cell included); and in the library, each field that is not speed-only changes the run's output.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from plstitch_eval.cli import app
from plstitch_eval.protocols.registry import (
    CV_TASK,
    RUNTIME_FIELDS,
    cv_protocols,
    get_protocol,
    registered_protocols,
)
from plstitch_eval.utils.device import resolve_device
from tests.eval.benchmark.conftest import SMALL_DATASET, runner, table_json
from tests.eval.protocols.stores import CellConfig, write_store


def other_value(field: dataclasses.Field, default: Any) -> Any:
    """A valid value of `field` other than `default`, no dearer to run (counts of 1, halved rates, half the
    grid), and far enough from it to change the run where the field matters."""
    if "choices" in field.metadata:
        return next(choice for choice in field.metadata["choices"] if choice != default)
    if field.name == "device":
        return "auto" if default == "cpu" else "cpu"
    if isinstance(default, bool):
        return not default
    if default is None:
        return 1
    if isinstance(default, int):
        return 1 if default > 1 else default + 1
    if isinstance(default, float):
        return default / 2 if default else 1e-3
    if isinstance(default, tuple):
        return default[: max(1, len(default) // 2)]
    raise AssertionError(f"no other value for {field.name} = {default!r}: teach other_value its type")


def other_values(config: Any) -> dict[str, Any]:
    """Every field of a config dataclass set to another value."""
    return {f.name: other_value(f, getattr(config, f.name)) for f in dataclasses.fields(config)}


def recorded(name: str, value: Any) -> list[Any]:
    """How the results JSON may record a setting: tuples as lists; a device as given or as the device it
    resolved to (the CLI resolves `auto` before the run)."""
    if name == "device":
        return [value, str(resolve_device(value))]
    return [list(value) if isinstance(value, tuple) else value]


# what a cell sets whatever it is given (a reason each): checked as that value
FIXED = {
    ("linear-tools", "balance_classes"): True,  # the tool probe is always class-balanced per tool
    ("linear-tools", "select_metric"): "mAP",  # and its head chosen on validation mAP
}


def assert_recorded(record: dict[str, Any], values: dict[str, Any], where: str) -> None:
    for name, value in values.items():
        assert name in record, f"{where}: {name} is not recorded"
        assert record[name] in recorded(name, value), f"{where}: {name} = {record[name]!r}, given {value!r}"


# protocols with a config of their own (linear-tools runs with linear's, cv with its inner protocol's)
CONFIGURED = [
    p.name
    for p in registered_protocols()
    if p.config_type is not None and dataclasses.is_dataclass(p.config_type)
]
CELLS = [p.name for p in registered_protocols() if p.run is not None and p.name != CV_TASK]


# --- the library: a field that is not speed-only changes the run ----------------------------------------

# fields whose other value gives the same output on any data, by design (a reason each)
SAME_OUTPUT = {
    ("knn", "backend"): "FAISS and the torch search find the same neighbours",
    ("temporal", "precision"): "autocast runs on CUDA only; on the CPU every precision is fp32",
}


def _cell_with(name: str, field: str, value: Any) -> CellConfig:
    protocol = get_protocol(name)
    cell = CellConfig()
    config = dataclasses.replace(protocol.config_of(cell), **{field: value})
    if protocol.section is not None:
        return dataclasses.replace(cell, **{protocol.section: config})
    return dataclasses.replace(cell, protocol_configs={name: config})


_BASE: dict[tuple[str, str], dict[str, Any]] = {}


def _base_run(name: str, root: Path) -> dict[str, Any]:
    key = (name, str(root))
    if key not in _BASE:
        _BASE[key] = get_protocol(name).run(root, CellConfig(), None)
    return _BASE[key]


def _fields_of(name: str) -> list[str]:
    return [f.name for f in dataclasses.fields(get_protocol(name).config_of(CellConfig()))]


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("arrive") / "store").root


@pytest.mark.parametrize(
    ("name", "field"),
    [(name, field) for name in CELLS if get_protocol(name).config_type for field in _fields_of(name)],
)
def test_a_field_reaches_the_cell_and_changes_it(name: str, field: str, store_root: Path) -> None:
    protocol = get_protocol(name)
    base_config = protocol.config_of(CellConfig())
    spec = next(f for f in dataclasses.fields(base_config) if f.name == field)
    value = other_value(spec, getattr(base_config, field))
    changed = protocol.run(store_root, _cell_with(name, field, value), None)
    fixed = (name, field) in FIXED
    assert_recorded(changed["protocol"], {field: FIXED.get((name, field), value)}, f"{name} cell")
    if (
        fixed
        or field in RUNTIME_FIELDS
        or (name, field) in SAME_OUTPUT
        or (name == "linear-tools" and ("linear", field) in SAME_OUTPUT)
    ):
        return
    base = _base_run(name, store_root)
    outputs = lambda r: (r["predictions"], r["protocol"].get("val_scores"), r["protocol"].get("train_losses"))  # noqa: E731
    assert outputs(changed) != outputs(base), f"{name}.{field} = {value!r} changed nothing in the run"


# --- the CLI: --set, --config and flags reach `plstitch cv` and every `plstitch benchmark` cell ------------

CV_FLAGS = {  # `plstitch cv` flags that set a protocol field
    "knn": {"k": "--k", "temperature": "--temperature", "weighting": "--weighting", "device": "--device"},
    "linear": {"epochs": "--epochs", "seed": "--seed", "device": "--device"},
    "temporal": {"epochs": "--epochs", "causal": "--causal", "seed": "--seed", "device": "--device"},
}
BENCHMARK_FLAGS = {  # `plstitch benchmark` flags that set a protocol field
    "knn": {"k": "--k", "temperature": "--temperature", "weighting": "--weighting"},
    "linear": {
        "lrs": "--lr",
        "weight_decays": "--wd",
        "optimizer": "--optimizer",
        "epochs": "--epochs",
        "select_metric": "--select-metric",
        "seed": "--seed",
    },
    "temporal": {"epochs": "--temporal-epochs", "causal": "--causal", "seed": "--seed"},
}


def flag_args(flags: dict[str, str], values: dict[str, Any]) -> list[str]:
    args: list[str] = []
    for field, flag in flags.items():
        value = values[field]
        if isinstance(value, bool):
            args += [flag] if value else []
        elif isinstance(value, tuple):
            for item in value:
                args += [flag, str(item)]
        else:
            args += [flag, str(value)]
    return args


def set_args(tables: dict[str, dict[str, Any]], bare: bool = False) -> list[str]:
    args = []
    for name, values in tables.items():
        for field, value in values.items():
            text = json.dumps(list(value) if isinstance(value, tuple) else value)
            args += ["--set", f"{field}={text}" if bare else f"{name}.{field}={text}"]
    return args


def write_config(path: Path, tables: dict[str, dict[str, Any]]) -> Path:
    lines = []
    for name, values in tables.items():
        lines.append(f'[protocols."{name}"]')
        lines += [f"{k} = {json.dumps(list(v) if isinstance(v, tuple) else v)}" for k, v in values.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def cv_values(name: str) -> dict[str, Any]:
    """Every field of `name`'s config at another value than its default (`plstitch cv` starts there)."""
    return other_values(get_protocol(name).config_type())


def _cv(store: Path, name: str, out: Path, *extra: str) -> dict[str, Any]:
    args = ["cv", "--features", str(store), "--protocol", name, "--folds", "3", "--json", str(out)]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("source", ["set", "config", "flags"])
@pytest.mark.parametrize("name", cv_protocols())
def test_every_field_reaches_cv(name: str, source: str, store_root: Path, tmp_path: Path) -> None:
    values = cv_values(name)
    if source == "set":
        extra = set_args({name: values}, bare=True)
    elif source == "config":
        extra = ["--config", str(write_config(tmp_path / "cv.toml", {name: values}))]
    else:
        if name not in CV_FLAGS:
            pytest.skip(f"`plstitch cv` has no flag of its own for {name} (--set and --config set it)")
        values = {field: values[field] for field in CV_FLAGS[name]}
        extra = flag_args(CV_FLAGS[name], values)
    results = _cv(store_root, name, tmp_path / "cv.json", *extra)
    assert results["protocol"]["inner"] == name
    assert_recorded(results["protocol"], values, f"cv --protocol {name} ({source})")


def _benchmark_tables() -> dict[str, dict[str, Any]]:
    """Every configured protocol's fields at other values (linear-tools shares linear's section)."""
    tables = {}
    for name in CONFIGURED:
        protocol = get_protocol(name)
        if protocol.section is not None and any(
            get_protocol(other).section == protocol.section for other in tables
        ):
            continue
        tables[name] = other_values(protocol.config_type())
    return tables


def _cell_values(name: str, tables: dict[str, dict[str, Any]]) -> dict[str, Any]:
    protocol = get_protocol(name)
    own = next((t for n, t in tables.items() if n == name or get_protocol(n).section == protocol.section), {})
    return {**own, **{field: value for (cell, field), value in FIXED.items() if cell == name}}


def test_every_field_reaches_every_benchmark_cell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three runs into one folder (the stores reused, the cells redone with --overwrite): every field by
    --config, then by --set, then the flags; each run's cv cell cross-validates another protocol."""
    monkeypatch.setenv("PLSTITCH_CACHE", str(tmp_path / "cache"))
    datasets = tmp_path / "small.toml"
    datasets.write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    out = tmp_path / "out"
    cells = ",".join([*CELLS, CV_TASK])
    base = ["benchmark", "--models", "plstitch-tiny-synthetic", "--datasets", str(datasets)]
    base += ["--protocols", cells, "--out", str(out), "--num-workers", "0", "--folds", "2", "--overwrite"]
    tables = _benchmark_tables()
    inners = list(cv_protocols())
    flag_values = {
        name: {f: tables[name][f] for f in flags} for name, flags in BENCHMARK_FLAGS.items() if name in tables
    }
    flag_values["linear"]["seed"] = flag_values["temporal"]["seed"]  # one --seed sets both
    runs = {
        "config": (["--config", str(write_config(tmp_path / "bench.toml", tables))], tables),
        "set": (set_args(tables), tables),
        "flags": (
            [a for name, flags in BENCHMARK_FLAGS.items() for a in flag_args(flags, flag_values[name])],
            flag_values,
        ),
    }
    for i, (source, (extra, given)) in enumerate(runs.items()):
        inner = inners[i % len(inners)]
        result = runner.invoke(app, [*base, *extra, "--cv-protocol", inner])
        assert result.exit_code == 0, result.output
        for cell in table_json(out)["cells"]:
            results = json.loads(Path(cell["results"]).read_text(encoding="utf-8"))
            name = cell["protocol"] if cell["protocol"] != CV_TASK else inner
            values = _cell_values(name, given)
            if cell["protocol"] == CV_TASK:
                assert results["protocol"]["inner"] == inner
            assert_recorded(results["protocol"], values, f"benchmark {cell['protocol']} cell ({source})")
