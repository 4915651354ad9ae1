"""One registry shape for every kind of extension: protocols, objectives, encoders, datasets, converters.

A `Registry` maps a name to an entry. Entries register where they are defined (timm's `@register_model`);
the shipped ones are imported on the registry's first use (`builtins`), then the modules that installed
packages name under the registry's entry-point group (`plstitch.protocols`, ...; pytest's `pytest11` is the
model), never at CLI start-up. A duplicate name is refused naming both packages (one definition registered
again from the same file and line - a plugin module run as `python -m` - is one registration); a plugin that
fails to load is one warning line naming it, never wrapped, and the rest works (`--debug` shows the
traceback). Listing order is stable: by `place` (the shipped ones' sections), then in registration order.
Unknown names get close matches.
"""

from __future__ import annotations

import contextvars
import difflib
import importlib
import math
import os
import sys
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from importlib import metadata
from types import FrameType, ModuleType
from typing import Generic, TypeVar

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import ONE_LINE, logger

__all__ = ["SHIPPED_PACKAGE", "Registry", "import_modules", "package_of", "plugin_entry_points"]

SHIPPED_PACKAGE = "plstitch"  # the distribution the built-in entries come from
_OWN_MODULES = ("plstitch_eval", "plstitch_train")
T = TypeVar("T")

# the package registering while an entry point loads (a plugin module registers at import)
_loading_package: contextvars.ContextVar[str | None] = contextvars.ContextVar("loading", default=None)


def package_of(module: str | None) -> str:
    """The installed distribution that provides `module` (`plstitch` for our own; the top-level module name
    when no distribution is known, e.g. a test file or a script)."""
    top = (module or "").split(".")[0]
    if not top or top in _OWN_MODULES:
        return SHIPPED_PACKAGE
    names = metadata.packages_distributions().get(top) or []
    return names[0] if names else top


# modules whose functions only pass a registration on (the registering module is the one calling them)
_PLUMBING = {
    __name__,
    "contextlib",
    "plstitch_eval.protocols.registry",
    "plstitch_eval.tasks.registry",
    "plstitch_eval.hub.model_registry",
    "plstitch_eval.data.datasets.registry",
    "plstitch_train.losses.registry",
}


def _registering_frame() -> FrameType | None:
    """The frame whose code asked to register: the first caller outside the registries' plumbing."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") in _PLUMBING:
        frame = frame.f_back
    return frame


def _registering_module() -> str | None:
    """The module whose code asked to register."""
    frame = _registering_frame()
    return frame.f_globals.get("__name__") if frame is not None else None


def _source(frame: FrameType | None) -> tuple[str, str, int] | None:
    """Where a registration was made: (module, resolved source file, line); None when the code is not from
    a file (`exec` of a string, an interactive session)."""
    if frame is None or not os.path.isfile(frame.f_code.co_filename):
        return None
    return frame.f_globals.get("__name__", ""), os.path.realpath(frame.f_code.co_filename), frame.f_lineno


def _defined_name(entry: object) -> str:
    """An entry's own name (a class's or function's qualified name; else its type's), to tell two copies of
    one definition from two definitions."""
    return getattr(entry, "__qualname__", None) or type(entry).__qualname__


def plugin_entry_points(group: str) -> list[metadata.EntryPoint]:
    """The entry points installed packages declare under `group`, in a stable order (package, name)."""
    found = metadata.entry_points(group=group)
    return sorted(found, key=lambda ep: ((ep.dist.name if ep.dist else ""), ep.name))


class Registry(MutableMapping[str, T], Generic[T]):
    """Name -> entry of one kind, read as a mapping (`name in registry`, `registry[name]`, iteration in
    listing order); `lookup(name)` is the one-line error with close matches that commands want. Item
    assignment (`registry[name] = entry`, as `monkeypatch.setitem` does) replaces an entry in place on
    purpose; `register` is the checked way in.

    `kind` names it in messages ("protocol"); `group` is its entry-point group; `builtins` imports the shipped
    modules (each registers itself); a kind without a group of its own (converter tags: an encoder plugin's
    module registers its tag) reads no entry points. `adopt(obj)` registers what an entry point names
    directly (an object rather than a module); None: entry points must name modules.
    """

    def __init__(
        self,
        kind: str,
        group: str | None,
        builtins: Callable[[], None] | None = None,
        adopt: Callable[[object], object] | None = None,
    ) -> None:
        self.kind, self.group = kind, group
        self._builtins, self._adopt = builtins, adopt
        self._entries: dict[str, T] = {}
        self._places: dict[str, float] = {}
        self._packages: dict[str, str] = {}
        self._sources: dict[str, tuple[str, str, int]] = {}  # where each entry was registered
        self._deleted: dict[str, tuple[float, str]] = {}  # place and package of entries deleted as items
        self._state = "new"  # new -> loading -> loaded
        self.failed: dict[str, str] = {}  # entry point -> why it did not load (one line each)

    # --- loading ------------------------------------------------------------------------------------------
    def load(self) -> None:
        """Import the shipped entries, then the plugins, once (re-entrant: loading registers)."""
        if self._state != "new":
            return
        self._state = "loading"
        try:
            if self._builtins is not None:
                self._builtins()
            for ep in plugin_entry_points(self.group) if self.group else ():
                self._load_plugin(ep)
        finally:
            self._state = "loaded"

    def _load_plugin(self, ep: metadata.EntryPoint) -> None:
        package = ep.dist.name if ep.dist else ep.value.split(".")[0]
        token = _loading_package.set(package)
        try:
            loaded = ep.load()
            if not isinstance(loaded, ModuleType):
                if self._adopt is None:
                    raise ConfigError(f"it names {type(loaded).__name__}, not a module that registers")
                self._adopt(loaded)
        except Exception as exc:  # noqa: BLE001 - a broken plugin must not break the CLI
            why = " ".join(str(exc).split()).rstrip(".") or type(exc).__name__
            where = f"{self.kind} plugin {ep.name!r} of package {package!r} ({self.group}: {ep.value})"
            self.failed[ep.name] = why
            logger.warning(
                "%s did not load and is skipped: %s (--debug shows the traceback)", where, why, extra=ONE_LINE
            )
            logger.debug("traceback of %s", where, exc_info=True)
        finally:
            _loading_package.reset(token)

    # --- registering --------------------------------------------------------------------------------------
    def register(self, name: str, entry: T, *, place: float = math.inf, package: str | None = None) -> T:
        """Add `entry` as `name` (at listing `place`); a name already taken by another entry is refused,
        naming both packages, unless it is the same definition run twice (`python -m` of a plugin module:
        `_same_registration`). Returns `entry`, so a module can keep it as a constant. Another package's
        entry loads the shipped ones first (so a clash names them); a shipped one loads nothing (it registers
        while the other shipped modules may still be importing)."""
        frame = _registering_frame()
        source = _source(frame)
        module = frame.f_globals.get("__name__") if frame is not None else None
        package = package or _loading_package.get() or package_of(module)
        if package != SHIPPED_PACKAGE:
            self.load()
        known = self._entries.get(name)
        if known is entry:  # the same entry again (a module imported twice): nothing changes
            return entry
        if known is not None and source is not None and self._same_registration(name, known, entry, source):
            if source[0] != "__main__":  # the later copy, unless it runs as a script: the module's real name
                self._entries[name], self._packages[name], self._sources[name] = entry, package, source
            return entry
        if known is not None:
            raise ConfigError(
                f"{self.kind.capitalize()} {name!r} is already registered, by package "
                f"{self._packages[name]!r}; package {package!r} registers it again: rename one of them."
            )
        self._entries[name] = entry
        self._places[name] = place
        self._packages[name] = package
        if source is not None:
            self._sources[name] = source
        return entry

    def _same_registration(self, name: str, known: T, entry: T, source: tuple[str, str, int]) -> bool:
        """Whether `entry` is `known` registered again by the same statement of the same source file: a
        plugin module run as `python -m` executes twice, as `__main__` and under its own name (which its entry
        point imports), making two copies of one definition (a reloaded module likewise)."""
        first = self._sources.get(name)
        return first is not None and first[1:] == source[1:] and _defined_name(known) == _defined_name(entry)

    def unregister(self, name: str) -> None:
        """Remove `name` (a test's toy, a session's own entry); a name not registered is ignored."""
        self._entries.pop(name, None)
        self._places.pop(name, None)
        self._packages.pop(name, None)
        self._sources.pop(name, None)

    @contextmanager
    def registered(self, name: str, entry: T, *, place: float = math.inf) -> Iterator[T]:
        """`with registry.registered(name, entry):` - registered inside the block only."""
        self.register(name, entry, place=place)
        try:
            yield entry
        finally:
            self.unregister(name)

    # --- reading ------------------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """Registered names in listing order: by place, then in registration order."""
        self.load()
        order = {name: i for i, name in enumerate(self._entries)}
        return sorted(self._entries, key=lambda n: (self._places[n], order[n]))

    def package(self, name: str) -> str:
        """The package `name` comes from (`plstitch` for the shipped entries)."""
        self.load()
        return self._packages[name]

    def close_matches(self, name: str, n: int = 3) -> list[str]:
        """Registered names closest to `name` (difflib ratio >= 0.6), best first."""
        return difflib.get_close_matches(name, self.names(), n=n, cutoff=0.6)

    def lookup(self, name: str, option: str | None = None) -> T:
        """The entry `name`; else one ConfigError line with close matches and the known names."""
        self.load()
        if name in self._entries:
            return self._entries[name]
        close = self.close_matches(name)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        what = f"--{option} {name!r}" if option else f"{self.kind} {name!r}"
        raise ConfigError(f"Unknown {what}.{hint} Known: {', '.join(self.names())}.")

    def __getitem__(self, name: str) -> T:
        self.load()
        return self._entries[name]

    def __setitem__(self, name: str, entry: T) -> None:
        self.load()
        if name not in self._entries:  # back at its old place when it was deleted (monkeypatch's undo)
            place, package = self._deleted.pop(name, (math.inf, package_of(_registering_module())))
            self._places[name], self._packages[name] = place, package
        self._entries[name] = entry

    def __delitem__(self, name: str) -> None:
        self.load()
        if name not in self._entries:
            raise KeyError(name)
        self._deleted[name] = (self._places[name], self._packages[name])
        self.unregister(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()!r})"


def import_modules(package: str, modules: tuple[str, ...]) -> Callable[[], None]:
    """A `builtins` loader importing `package.<module>` for each module (each registers itself)."""

    def load() -> None:
        for module in modules:
            importlib.import_module(f"{package}.{module}")

    return load
