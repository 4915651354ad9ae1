"""The model registry: `MODELS` (name -> `ModelEntry`), filled by `register(...)` where each entry is defined.

Like timm's `@register_model`, a family module (`hub/families/*.py`) calls `register(ModelEntry(...),
listing=...)` beside the entry's definition. `listing` places the entry in `plstitch models`: the hundreds are
the section (`RELEASES`, `PAPER_BASELINES`, `BASELINES_2026`, `SHIPPED`), the units its place in it; entries
registered without one (your own, a test's) follow, in registration order. `hub/registry.py` imports the
families, so importing it (or `plstitch_eval.hub`) gives the full registry.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from contextlib import contextmanager

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.converter_registry import CLIP_CONVERTERS, CONVERTERS
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.registry import Registry, import_modules

# listing sections of `plstitch models`: PL-Stitch's releases, the paper's baselines, the 2026 baselines,
# then the shipped tiny models and the raw-pixels reference row
RELEASES, PAPER_BASELINES, BASELINES_2026, SHIPPED = 100, 200, 300, 900

_FAMILIES = ("plstitch", "general", "surgical", "video")  # `hub/families/<name>.py`, each registering its own


def _adopt(entry: object) -> object:
    """An entry point naming a `ModelEntry` (rather than a module that registers one) registers it."""
    if not isinstance(entry, ModelEntry):
        raise ConfigError(f"it names a {type(entry).__name__}, not a ModelEntry or a module")
    return register(entry)


# every named encoder, in listing order: the shipped families, then installed packages' `plstitch.encoders`
MODELS: Registry[ModelEntry] = Registry(
    "model", "plstitch.encoders", import_modules("plstitch_eval.hub.families", _FAMILIES), _adopt
)


def register(entry: ModelEntry, *, listing: float = math.inf) -> ModelEntry:
    """Add a registry entry at place `listing` of the listing; returns it so it can be used as a constant.
    Its converter tag must be registered (`hub/converter_registry.py`); a name taken by another entry is
    refused, naming both packages."""
    if entry.converter not in CONVERTERS:
        raise ConfigError(
            f"Model {entry.name!r}: unknown converter {entry.converter!r}; "
            f"choose one of {', '.join(CONVERTERS)}."
        )
    if (entry.converter in CLIP_CONVERTERS) != (entry.clip is not None):
        raise ConfigError(
            f"Model {entry.name!r}: converters {', '.join(CLIP_CONVERTERS)} need a clip window "
            f"(ModelEntry.clip) and other converters none; got converter {entry.converter!r}, "
            f"clip {entry.clip}."
        )
    return MODELS.register(entry.name, entry, place=listing)


def unregister(name: str) -> None:
    """Remove entry `name` (a test's or a session's own model); a name not registered is ignored."""
    MODELS.unregister(name)


@contextmanager
def registered(entry: ModelEntry, *, listing: float = math.inf) -> Iterator[ModelEntry]:
    """`with registered(ModelEntry(...)) as entry:` - the entry is in the registry inside the block only."""
    register(entry, listing=listing)
    try:
        yield entry
    finally:
        unregister(entry.name)


def get_model_entry(name: str) -> ModelEntry:
    """The entry named `name`, or a `ConfigError` listing the known names."""
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigError(
            f"Unknown model {name!r}.{did_you_mean(name)} Known: {', '.join(sorted(MODELS))}."
        ) from None


def close_model_names(name: str, n: int = 3) -> list[str]:
    """Registry names closest to `name` (difflib ratio >= 0.6), best first.

    Why: a mistyped model name should point at the name the user meant.
    """
    return difflib.get_close_matches(name, list(MODELS), n=n, cutoff=0.6)


def did_you_mean(name: str) -> str:
    """A hint such as `Did you mean 'a'?` naming the registry names closest to `name`; "" when none is."""
    close = [repr(c) for c in close_model_names(name)]
    if not close:
        return ""
    return f" Did you mean {' or '.join([', '.join(close[:-1]), close[-1]] if len(close) > 1 else close)}?"


def list_models() -> list[ModelEntry]:
    """All entries, in listing order (the order `plstitch models` shows)."""
    return list(MODELS.values())


__all__ = [
    "BASELINES_2026",
    "MODELS",
    "PAPER_BASELINES",
    "RELEASES",
    "SHIPPED",
    "ModelEntry",
    "close_model_names",
    "did_you_mean",
    "get_model_entry",
    "list_models",
    "register",
    "registered",
    "unregister",
]
