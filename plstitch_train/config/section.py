"""What every section of a `TrainConfig` shares: its field names, its plain-JSON form and a checked copy.

Why one base: each section (`frames`, `sampling`, `model`, `loss`, `optim`, `run`) checks its own fields in
`__post_init__`, and reading one back from JSON or changing one field goes through that check the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

from plstitch_eval.errors import ConfigError

S = TypeVar("S", bound="Section")


@dataclasses.dataclass
class Section:
    """Base of the sections; `NAME` is the section's attribute on `TrainConfig` and its key in the JSON."""

    NAME: ClassVar[str] = ""
    TUPLE_FIELDS: ClassVar[tuple[str, ...]] = ()  # JSON lists read back as tuples

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The section's settings, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (tuples become lists)."""
        out = dataclasses.asdict(self)
        for key in self.TUPLE_FIELDS:
            out[key] = list(out[key])
        return out

    @classmethod
    def from_dict(cls: type[S], data: Mapping[str, Any]) -> S:
        """Inverse of `to_dict` (missing keys: defaults); an unknown key is a ConfigError naming it."""
        cls.check_names(data)
        return cls(**data)

    def replace(self: S, **changes: Any) -> S:
        """A checked copy with `changes` applied (every value, None included)."""
        self.check_names(changes)
        return dataclasses.replace(self, **changes)

    @classmethod
    def check_names(cls, names: Any) -> None:
        unknown = sorted(set(names) - set(cls.field_names()))
        if unknown:
            raise ConfigError(
                f"Unknown {cls.NAME} settings {unknown}; the {cls.NAME} section holds "
                f"{list(cls.field_names())}."
            )

    def _tuples(self) -> None:
        """Lists given for tuple fields (JSON, `--set`) become tuples, so equal settings compare equal."""
        for key in self.TUPLE_FIELDS:
            value = getattr(self, key)
            if isinstance(value, list):
                object.__setattr__(self, key, tuple(value))


def require(condition: bool, message: str) -> None:
    """Raise a one-line ConfigError with `message` (naming the field) unless `condition`."""
    if not condition:
        raise ConfigError(message)
