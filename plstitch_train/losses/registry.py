"""Objectives of the L_vid branch, looked up by name: `@register_objective` beside each objective's class.

Why: the model builds whatever `config.loss.objective` names without a branch on the name, so a new objective
is one module (`losses/<name>.py`, or a module of another package named under the `plstitch.objectives` entry
point group) that registers one class (timm's `@register_model`, lightly's `loss/`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from plstitch_eval.errors import ConfigError
from plstitch_eval.registry import Registry, import_modules
from plstitch_train.config.loss import OBJECTIVE_GROUP, OBJECTIVES, accept_objective, forget_objective

if TYPE_CHECKING:
    from plstitch_train.losses.objective import Objective

__all__ = [
    "OBJECTIVE_REGISTRY",
    "get_objective",
    "objective_names",
    "register_objective",
    "unregister_objective",
]

ObjectiveClass = TypeVar("ObjectiveClass", bound="type[Objective]")
_BUILTIN_MODULES = ("plackett_luce", "pairwise", "permutation")


def _adopt(cls: object) -> object:
    """An entry point naming an `Objective` class (rather than a module that registers one) registers it."""
    if not isinstance(cls, type) or not getattr(cls, "name", ""):
        raise ConfigError("it names neither a module nor an Objective class with a `name`")
    return register_objective(cls)


# every L_vid objective by name: the built-ins in `OBJECTIVES` order, then installed packages' entry points
OBJECTIVE_REGISTRY: Registry[type] = Registry(
    "objective", OBJECTIVE_GROUP, import_modules("plstitch_train.losses", _BUILTIN_MODULES), _adopt
)


def register_objective(cls: ObjectiveClass) -> ObjectiveClass:
    """Class decorator: make `cls` the objective called `cls.name` (and a value `--objective` accepts)."""
    name = getattr(cls, "name", "")
    if not name:
        raise ConfigError(f"Objective class {cls.__name__} has no `name`; set name = '<objective>' on it.")
    place = OBJECTIVES.index(name) if name in OBJECTIVES else float("inf")
    OBJECTIVE_REGISTRY.register(name, cls, place=place)
    accept_objective(name, getattr(cls, "facts", None))
    return cls


def unregister_objective(name: str) -> None:
    """Remove the objective called `name` (tests that register a toy one clean up with this)."""
    if name not in OBJECTIVE_REGISTRY:
        raise ConfigError(f"No objective {name!r} is registered; known: {', '.join(objective_names())}.")
    OBJECTIVE_REGISTRY.unregister(name)
    forget_objective(name)


def get_objective(name: str) -> type[Objective]:
    """The objective class registered as `name`; a one-line ConfigError naming the known ones otherwise."""
    return OBJECTIVE_REGISTRY.lookup(name, "objective")


def objective_names() -> tuple[str, ...]:
    """Names of the registered objectives: the built-ins in `OBJECTIVES` order, then others as registered."""
    return tuple(OBJECTIVE_REGISTRY.names())
