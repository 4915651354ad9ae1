"""The protocol registry: one `Protocol` per evaluation protocol, registered by the module that defines it.

Like timm's `@register_model` or CLIP_benchmark's TYPE2FUNC: `cv`, `benchmark`, results labels and titles,
quickstart and model cards look a protocol up here (`get_protocol`) or iterate the registry
(`registered_protocols`) instead of listing names. A new protocol is one module that calls
`register_protocol(Protocol(...))`; docs/architecture.md says how.
"""

from __future__ import annotations

import difflib
import importlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.registry import Registry

if TYPE_CHECKING:
    from plstitch_eval.store.features import VideoFeatures

# the shipped protocols (name: its module in `plstitch_eval.protocols`), in the order the CLI lists them;
# they register on the registry's first use (`load_shipped`): importing one protocol module loads no other
SHIPPED = {
    "knn": "knn",
    "majority": "majority",
    "linear": "linear",
    "temporal": "temporal",
    "cv": "cv",
    "linear-tools": "tools",
}
RUNTIME_FIELDS = ("device", "num_threads", "chunk_size")  # change speed, not numbers: not in the settings
CV_TASK = "cv"  # the results task of a cross-validation; a table names it `cv-<inner protocol>`
OTHER_TITLES = {"score": "Scored"}  # results tasks that no protocol makes (`plstitch score`)


@dataclass(frozen=True)
class Fold:
    """One cross-validation fold as a protocol's fold fit gets it: checked videos and what scoring needs."""

    index: int
    train: list[VideoFeatures]
    val: list[VideoFeatures]  # empty unless the protocol holds validation videos out (`CvFit.holds_out_val`)
    test: list[VideoFeatures]
    num_classes: int
    background: list[int]
    train_labels: np.ndarray  # the labelled training frames' labels


FoldFit = Callable[[Fold, Any, bool], tuple[dict[str, np.ndarray], dict[str, Any]]]


@dataclass(frozen=True)
class CvFit:
    """How `run_cv` cross-validates a protocol: `fit(fold, config, progress) -> (predictions, fold extras)`.

    `holds_out_val`: validation videos are held out of each fold's training videos by video. `summary`, if
    given, maps the fold records and the config to extra `protocol` fields of the CV results.
    """

    fit: FoldFit
    holds_out_val: bool = True
    summary: Callable[[list[dict[str, Any]], Any], dict[str, Any]] | None = None


@dataclass(frozen=True)
class Protocol:
    """An evaluation protocol: its results `task` name, labels, config and what runs it where.

    `run(store, config, scheme)` runs it as a benchmark cell (config: a `BenchmarkConfig`, or any object
    with its sections and fields); `settings(config)` is what a cell's numbers depend on besides the model,
    dataset and extraction; `table_metrics(phase_metrics)` its table columns (None: the phase metrics);
    `probe_kind` the `plstitch_eval.probes` kind `--save` writes (None: it cannot be saved). `chooses`: the
    keys of its results' `protocol` record (and of each CV fold's record) that it chooses on validation videos
    (a head, an epoch), beside `val_scores`, the validation figure of each candidate; a protocol that chooses
    must name them, so the registry-wide tests check that test labels never move them and val labels do.
    """

    name: str
    label: str  # table column label, e.g. "k-NN"
    title: str  # model-card metric title, e.g. "Linear probe"
    config_type: type | None = None  # its config dataclass
    section: str | None = None  # the `BenchmarkConfig` field holding it (None: `protocol_configs[name]`)
    run: Callable[[str | Path, Any, str | None], dict[str, Any]] | None = None  # None: not a benchmark cell
    cv: CvFit | None = None  # None: it cannot be cross-validated
    settings: Callable[[Any], dict[str, Any]] | None = None
    table_metrics: Callable[[tuple[str, ...]], tuple[str, ...]] | None = None
    probe_kind: str | None = None
    chooses: tuple[str, ...] = ()
    # a model card's note after the metric title, from the results' `protocol` record (e.g. " (k=20)")
    card_detail: Callable[[Mapping[str, Any]], str] | None = None

    def config_of(self, config: Any) -> Any:
        """This protocol's config out of a sectioned config: its `section`, else its entry under its name in
        `protocol_configs` (a `BenchmarkConfig` read from `--config FILE`), else its default config."""
        if self.section is not None:
            return getattr(config, self.section)
        own = getattr(config, "protocol_configs", {}).get(self.name)
        if own is not None:
            return own
        return self.config_type() if self.config_type is not None else None


def _load_shipped() -> None:
    """Import (so register) the shipped protocols, in `SHIPPED` order.

    Why on first use, by module name: `plstitch score` imports one protocol module (its prediction files) and
    would otherwise load every protocol (torch, scikit-learn: +2-3 s start-up measured); every protocol
    module imports `results_json`, so importing them here at the top would close an import circle.
    """
    for module in SHIPPED.values():
        importlib.import_module(f"plstitch_eval.protocols.{module}")


def _adopt(protocol: object) -> object:
    """An entry point naming a `Protocol` object (rather than a module that registers one) registers it."""
    if not isinstance(protocol, Protocol):
        raise ConfigError(f"it names a {type(protocol).__name__}, not a Protocol or a module")
    return register_protocol(protocol)


# every protocol by name: the shipped ones, then the `plstitch.protocols` entry points of installed packages
PROTOCOLS: Registry[Protocol] = Registry("protocol", "plstitch.protocols", _load_shipped, _adopt)


def load_shipped() -> None:
    """Load the registry (the shipped protocols, then the plugins) before a lookup reads it."""
    PROTOCOLS.load()


def _in_order() -> list[Protocol]:
    """The registered protocols: the shipped ones in `SHIPPED` order, then the others as registered."""
    return list(PROTOCOLS.values())


def register_protocol(protocol: Protocol) -> Protocol:
    """Register `protocol` under its name; a second protocol of the same name is refused (ConfigError).

    Why: defining a protocol is registering it, so cv, benchmark, tables and cards find it by name. The
    shipped protocols take their `SHIPPED` places ahead of a plugin's.
    """
    place = list(SHIPPED).index(protocol.name) if protocol.name in SHIPPED else math.inf
    return PROTOCOLS.register(protocol.name, protocol, place=place)


def unregister_protocol(name: str) -> None:
    """Remove a registered protocol (tests that register a toy one clean up with it)."""
    PROTOCOLS.unregister(name)


def registered_protocols() -> list[Protocol]:
    """Every registered protocol: the shipped ones in listing order, then the others as registered."""
    return _in_order()


def protocol_names(where: Callable[[Protocol], bool] = lambda _p: True) -> tuple[str, ...]:
    """Names of the registered protocols `where` accepts, in `registered_protocols` order."""
    return tuple(p.name for p in _in_order() if where(p))


def get_protocol(name: str, option: str = "protocol", choices: Sequence[str] | None = None) -> Protocol:
    """The protocol registered as `name`; else a one-line ConfigError naming `option` and the choices."""
    known = protocol_names() if choices is None else tuple(choices)
    if name not in known or name not in PROTOCOLS:
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"--{option} must be one of {', '.join(known)}, got {name!r}.{hint}")
    return PROTOCOLS[name]


def cv_protocols() -> tuple[str, ...]:
    """The protocols `plstitch cv --protocol` cross-validates (those with a fold fit)."""
    return protocol_names(lambda p: p.cv is not None)


def benchmark_protocols() -> tuple[str, ...]:
    """The protocols a benchmark cell may run (those with a `run`)."""
    return protocol_names(lambda p: p.run is not None)


def numbers_only(config: Any) -> dict[str, Any]:
    """A config dataclass as a dict without the fields that change speed, not numbers (`RUNTIME_FIELDS`)."""
    return {k: v for k, v in asdict(config).items() if k not in RUNTIME_FIELDS}


def config_record(config: Any) -> dict[str, Any]:
    """A config dataclass as a results `protocol` records it (tuples as lists, as JSON reads them back)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def cv_task(inner: str) -> str:
    """The table's task name of a cross-validated protocol, e.g. `cv-knn`."""
    return f"{CV_TASK}-{inner}"


def _task_labels() -> dict[str, str]:
    load_shipped()
    labels = {p.name: p.label for p in _in_order() if p.name != CV_TASK}
    labels.update({cv_task(name): f"CV {PROTOCOLS[name].label}" for name in cv_protocols()})
    return labels


def _task_titles() -> dict[str, str]:
    load_shipped()
    return {**{p.name: p.title for p in _in_order()}, **OTHER_TITLES}


class _LiveMapping(Mapping[str, str]):
    """A read-only mapping rebuilt from the registry at each use, so a protocol registered later shows."""

    def __init__(self, build: Callable[[], dict[str, str]]) -> None:
        self._build = build

    def __getitem__(self, key: str) -> str:
        return self._build()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._build())

    def __len__(self) -> int:
        return len(self._build())

    def __repr__(self) -> str:
        return repr(self._build())


# what a results `task` is called: short labels for table columns, titles for model-card metric names
TASK_LABELS: Mapping[str, str] = _LiveMapping(_task_labels)
TASK_TITLES: Mapping[str, str] = _LiveMapping(_task_titles)


def task_label(task: str) -> str:
    """The table label of a results task (`k-NN`, `CV linear`); the task itself when none is known."""
    return TASK_LABELS.get(task, task)


def task_card_detail(task: str, record: Mapping[str, Any]) -> str:
    """What a model card adds after a results task's title (the protocol's `card_detail`; "" when none)."""
    protocol = PROTOCOLS.get(task)
    return protocol.card_detail(record) if protocol is not None and protocol.card_detail else ""


def task_title(task: str) -> str:
    """The model-card title of a results task (`Linear probe`); the task itself when none is known."""
    return TASK_TITLES.get(task, task)
