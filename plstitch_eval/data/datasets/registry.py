"""Name -> dataset adapter class registry (`@register_dataset("name")`), like timm's model registry."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

from plstitch_eval.errors import ConfigError

_REGISTRY: dict[str, type] = {}


def register_dataset(name: str) -> Callable[[type], type]:
    """Class decorator adding a `DatasetAdapter` subclass to the registry under `name`."""

    def decorate(cls: type) -> type:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ConfigError(f"dataset '{name}' is registered twice")
        _REGISTRY[name] = cls
        return cls

    return decorate


def list_datasets() -> list[str]:
    """Registered dataset names, sorted."""
    return sorted(_REGISTRY)


def dataset_class(name: str) -> type:
    """The adapter class registered as `name`, or a ConfigError listing the known names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown dataset '{name}'; known: {', '.join(list_datasets())}") from None


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
        cls = _REGISTRY[name]
        doc = (cls.__doc__ or "").strip().splitlines()
        rows.append(
            {
                "name": name,
                "summary": doc[0] if doc else "",
                "native_fps": getattr(cls, "native_fps", None),
                "eval_fps": getattr(cls, "default_eval_fps", None),
                "split_schemes": list(getattr(cls, "split_schemes", ())),
                "classes": list(getattr(cls, "class_names", [])),
                "background_classes": list(getattr(cls, "background_classes", [])),
            }
        )
    return rows
