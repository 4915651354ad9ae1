"""Name -> dataset adapter class registry (`@register_dataset("name")`), like timm's model registry."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_eval.registry import Registry, import_modules

# the shipped adapters' modules (synthetic.py registers synthetic and synthetic-paced, cholect50.py cholect50
# and cholect45)
_SHIPPED = (
    "autolaparo",
    "breakfast",
    "cholec80",
    "cholect50",
    "endoscapes",
    "folder",
    "gtea",
    "jigsaws",
    "m2cai16",
    "synthetic",
)


def _adopt(cls: object) -> object:
    """An entry point naming an adapter class (with a `name`) rather than a module registers it."""
    name = getattr(cls, "name", None)
    if not isinstance(cls, type) or not name:
        raise ConfigError("it names neither a module nor a DatasetAdapter class with a `name`")
    return register_dataset(name)(cls)


# every dataset adapter by name: the shipped ones, then installed packages' `plstitch.datasets` entry points
DATASETS: Registry[type] = Registry(
    "dataset", "plstitch.datasets", import_modules("plstitch_eval.data.datasets", _SHIPPED), _adopt
)


def register_dataset(name: str) -> Callable[[type], type]:
    """Class decorator adding a `DatasetAdapter` subclass to the registry under `name` (a name taken by
    another class is refused, naming both packages)."""

    def decorate(cls: type) -> type:
        return DATASETS.register(name, cls)

    return decorate


def unregister_dataset(name: str) -> None:
    """Remove the adapter registered as `name` (a test's toy dataset); a name not registered is ignored."""
    DATASETS.unregister(name)


@contextmanager
def registered_dataset(name: str, cls: type) -> Iterator[type]:
    """`with registered_dataset("toy", ToyAdapter):` - the adapter is registered inside the block only."""
    register_dataset(name)(cls)
    try:
        yield cls
    finally:
        unregister_dataset(name)


def list_datasets() -> list[str]:
    """Registered dataset names: the shipped ones (alphabetical), then the plugins' as registered."""
    return DATASETS.names()


def dataset_class(name: str) -> type:
    """The adapter class registered as `name`, or a ConfigError with close matches and the known names."""
    return DATASETS.lookup(name)


def get_dataset(name: str, root: str | os.PathLike | None = None, **options: Any) -> Any:
    """Build the adapter `name` on `root` with adapter-specific options (e.g. fps=15, video_dir="videos")."""
    cls = dataset_class(name)
    params = inspect.signature(cls.__init__).parameters
    accepted = [p for p in params if p not in ("self", "root")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(
            f"dataset '{name}' does not take option(s) {', '.join(unknown)}; "
            f"it accepts: {', '.join(accepted)}"
        )
    if root is None and params["root"].default is inspect.Parameter.empty:
        raise ConfigError(f"dataset '{name}' needs its folder: pass --root DIR")
    if root is None:
        return cls(**options)
    return cls(root, **options)


def describe_datasets() -> list[dict[str, Any]]:
    """One row per registered dataset (name, summary, fps, split schemes, classes) for `plstitch datasets`."""
    rows = []
    for name in list_datasets():
        cls = DATASETS[name]
        doc = (cls.__doc__ or "").strip().splitlines()
        rows.append(
            {
                "name": name,
                "package": DATASETS.package(name),
                "summary": doc[0] if doc else "",
                "native_fps": getattr(cls, "native_fps", None),
                "eval_fps": getattr(cls, "default_eval_fps", None),
                "split_schemes": list(getattr(cls, "split_schemes", ())),
                "classes": list(getattr(cls, "class_names", [])),
                "background_classes": list(getattr(cls, "background_classes", [])),
            }
        )
    return rows


@dataclass(frozen=True)
class DatasetFacts:
    """What scoring and cards need to know of a dataset key: its printed name, family, background classes and
    licence.

    Why one home: the metric family (surgical -> accuracy + macro F1; cooking -> Edit + F1@k), the segment
    metrics' background and the card's dataset name all follow from the adapter, so they are read from it.
    """

    display_name: str
    family: str  # "surgical" or "cooking"
    background_classes: tuple[str, ...] = ()
    license: str = "unknown"  # the data's terms of use, and where they are stated
    license_source: str = ""


# datasets read through another adapter (50Salads comes in the MS-TCN layout, like GTEA and Breakfast)
_WITHOUT_ADAPTER = {"50salads": DatasetFacts("50Salads", "cooking", ("action_start", "action_end"))}


def dataset_facts(name: str | None) -> DatasetFacts:
    """Facts of a dataset key: the registered adapter's (exact name), else a known prefix's family (e.g.
    ``gtea_split1`` is cooking), else surgical with the key as its name and no background."""
    key = (name or "").lower()
    known = {n: _adapter_facts(cls) for n, cls in DATASETS.items()} | _WITHOUT_ADAPTER
    if key in known:
        return known[key]
    family = next(
        (f.family for n, f in known.items() if key.startswith(n) and f.family == "cooking"), "surgical"
    )
    return DatasetFacts(name or "", family)


def _adapter_facts(cls: type) -> DatasetFacts:
    return DatasetFacts(
        getattr(cls, "display_name", "") or getattr(cls, "name", ""),
        getattr(cls, "family", "surgical"),
        tuple(getattr(cls, "background_classes", ())),
        getattr(cls, "license", "unknown"),
        getattr(cls, "license_source", ""),
    )
