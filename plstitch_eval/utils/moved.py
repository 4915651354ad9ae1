"""Old module paths as aliases of their new homes: saved code still imports the old names, with a
`DeprecationWarning` naming the new path and the release that removes the old one (`REMOVED_IN`)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Mapping, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

__all__ = ["REMOVED_IN", "MovedModuleFinder", "alias_modules"]

REMOVED_IN = "0.3.0"  # the plstitch release that drops the old module paths


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as its new module (the module importlib hands back is the new one)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # a placeholder module; `exec_module` replaces it in sys.modules

    def exec_module(self, module: ModuleType) -> None:
        old = module.__spec__.name
        warnings.warn(
            f"{old} has moved to {self.new}; import it from there ({old} is removed in plstitch "
            f"{REMOVED_IN}).",
            DeprecationWarning,
            stacklevel=2,
        )
        sys.modules[old] = importlib.import_module(self.new)


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old dotted names of `moved` (old -> new), and nothing else.

    `import old`, `from old import x` and `importlib.import_module(old)` then give the very module object of
    the new name (no shim file, no second copy): the loader imports the new module and puts it in
    `sys.modules` under the old name, which the import system returns in place of its placeholder.
    """

    def __init__(self) -> None:
        self.moved: dict[str, str] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = self.moved.get(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def alias_modules(moved: Mapping[str, str]) -> MovedModuleFinder:
    """Serve each old name of `moved` as its new module; the one finder on `sys.meta_path` (added once, last:
    an old name has no file left, so every other finder has already said no)."""
    finder = next((f for f in sys.meta_path if _is_moved_finder(f)), None)
    if finder is None:
        finder = MovedModuleFinder()
        sys.meta_path.append(finder)
    finder.moved.update(moved)
    return finder


def _is_moved_finder(finder: object) -> bool:
    """Whether `finder` is a MovedModuleFinder, also one made before this module was reloaded."""
    kind = type(finder)
    return kind.__module__ == __name__ and kind.__qualname__ == MovedModuleFinder.__qualname__
