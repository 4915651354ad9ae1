"""Objectives of the L_vid branch, looked up by name: `@register_objective` beside each objective's class.

Why: the model builds whatever `config.loss.objective` names without a branch on the name, so a new objective
is one module (`losses/<name>.py`) that registers one class (timm's `@register_model`, lightly's `loss/`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from plstitch_eval.errors import ConfigError
from plstitch_train.config.loss import OBJECTIVES, accept_objective, forget_objective

if TYPE_CHECKING:
    from plstitch_train.losses.objective import Objective

__all__ = ["get_objective", "objective_names", "register_objective", "unregister_objective"]

_OBJECTIVES: dict[str, type[Objective]] = {}
ObjectiveClass = TypeVar("ObjectiveClass", bound="type[Objective]")


def register_objective(cls: ObjectiveClass) -> ObjectiveClass:
    """Class decorator: make `cls` the objective called `cls.name` (and a value `--objective` accepts)."""
    name = getattr(cls, "name", "")
    if not name:
        raise ConfigError(f"Objective class {cls.__name__} has no `name`; set name = '<objective>' on it.")
    if name in _OBJECTIVES:
        raise ConfigError(
            f"Objective {name!r} is already registered ({_OBJECTIVES[name].__name__}); pick another name."
        )
    _OBJECTIVES[name] = cls
    accept_objective(name)
    return cls


def unregister_objective(name: str) -> None:
    """Remove the objective called `name` (tests that register a toy one clean up with this)."""
    if _OBJECTIVES.pop(name, None) is None:
        raise ConfigError(f"No objective {name!r} is registered; known: {', '.join(objective_names())}.")
    forget_objective(name)


def get_objective(name: str) -> type[Objective]:
    """The objective class registered as `name`; a one-line ConfigError naming the known ones otherwise."""
    try:
        return _OBJECTIVES[name]
    except KeyError:
        raise ConfigError(f"objective {name!r} unknown; use one of {', '.join(objective_names())}.") from None


def objective_names() -> tuple[str, ...]:
    """Names of the registered objectives: the built-ins in `OBJECTIVES` order, then others as registered."""
    added = [name for name in _OBJECTIVES if name not in OBJECTIVES]
    return (*[name for name in OBJECTIVES if name in _OBJECTIVES], *added)
