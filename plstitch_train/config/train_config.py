"""`TrainConfig`: all settings of one pretraining run, in six sections - `frames`, `sampling`, `model`,
`loss`, `optim`, `run` - each a dataclass checking its own fields (`config.optim.base_lr`).

Every setting also has a flat name, unique across sections (`base_lr`), which is the compatibility path of
scripts, presets, the CLI and run folders saved before the sections existed:

- `TrainConfig(epochs=6)`, `config.replace(epochs=6)` / `config.with_changes(...)` and `dataclasses.replace`
  take flat names, `section.name` spellings (`optim.epochs`) and whole sections (`optim=OptimConfig(...)`);
- `config.epochs` reads (and `config.epochs = 6` writes) the setting in its section (`__getattr__`);
- `from_dict` reads the nested form `to_dict` writes and the old flat form (`to_flat_dict`), which
  `flat_settings` turns any saved form into (what "is this the same run?" compares).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_train.config.frames import FramesConfig
from plstitch_train.config.loss import PERMUTATION_FACTS, LossConfig, objective_facts
from plstitch_train.config.model import ModelConfig
from plstitch_train.config.optim import OptimConfig
from plstitch_train.config.run import RunConfig
from plstitch_train.config.sampling import SamplingConfig
from plstitch_train.config.section import Section

SECTIONS: dict[str, type[Section]] = {
    cls.NAME: cls for cls in (FramesConfig, SamplingConfig, ModelConfig, LossConfig, OptimConfig, RunConfig)
}
FIELD_SECTION: dict[str, str] = {
    name: section for section, cls in SECTIONS.items() for name in cls.field_names()
}
FLAT_FIELDS = tuple(FIELD_SECTION)  # every setting's flat name, in the order of the old flat TrainConfig
_COUNT = sum(len(cls.field_names()) for cls in SECTIONS.values())
if len(FIELD_SECTION) != _COUNT or set(SECTIONS) & set(FIELD_SECTION):  # the flat names must stay unique
    raise RuntimeError("TrainConfig setting names must be unique across sections and differ from sections.")


def setting_name(key: str) -> str:
    """The flat name of a setting given flat (`base_lr`) or with its section (`optim.base_lr`)."""
    section, dot, name = key.rpartition(".")
    if name in FIELD_SECTION and (not dot or FIELD_SECTION[name] == section):
        return name
    if dot and name in FIELD_SECTION:
        raise ConfigError(f"Training setting {key!r}: {name} belongs to section {FIELD_SECTION[name]!r}.")
    close = difflib.get_close_matches(name, FLAT_FIELDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ConfigError(f"Unknown training setting {key!r}{hint}; known: {sorted(FLAT_FIELDS)}.")


# settings added after run folders were first saved, with the value every config saved before them computed
# with: a saved config without one reads as that value (`from_dict`, `run.plan.comparable_settings`)
ADDED_SETTINGS = {
    "centering": "center",
    "permutation_head": "linear",
    "permutation_classes": 0,
    "local_crops": 0,
    "local_crops_scale": [0.05, 0.4],  # as saved (JSON lists)
    "local_crop_size": 0,
}
# settings that change nothing unless the objective is permutation classification (`PERMUTATION_FACTS`)
PERMUTATION_SETTINGS = PERMUTATION_FACTS.settings


def flat_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Any saved form of a TrainConfig (nested sections, old flat dict, `section.name` keys) as one flat dict.

    Keys it does not know are kept as they are, so comparing two saved configs sees every difference.
    """
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key in SECTIONS and isinstance(value, Mapping):
            out.update(value)
        elif "." in key and key.rpartition(".")[2] in FIELD_SECTION:
            out[key.rpartition(".")[2]] = value
        else:
            out[key] = value
    return out


@dataclasses.dataclass(init=False)
class TrainConfig:
    """All settings of one pretraining run; JSON-serialisable through `to_dict` / `from_dict`.

    Every value is checked on construction (each section its own fields; here the checks across sections),
    also by `replace`, `from_dict` and the presets, so a bad setting fails before any video is decoded; only
    the data source waits for `validate()`, as presets name none.
    """

    frames: FramesConfig
    sampling: SamplingConfig
    model: ModelConfig
    loss: LossConfig
    optim: OptimConfig
    run: RunConfig

    def __init__(
        self,
        frames: FramesConfig | None = None,
        sampling: SamplingConfig | None = None,
        model: ModelConfig | None = None,
        loss: LossConfig | None = None,
        optim: OptimConfig | None = None,
        run: RunConfig | None = None,
        **settings: Any,
    ) -> None:
        """Sections (default: their defaults), then `settings` by flat or `section.name` name on top."""
        given = {
            "frames": frames,
            "sampling": sampling,
            "model": model,
            "loss": loss,
            "optim": optim,
            "run": run,
        }
        changes: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
        for key, value in settings.items():
            name = setting_name(key)
            if name in changes[FIELD_SECTION[name]]:
                raise ConfigError(f"Training setting {name} is given twice ({key!r} and another spelling).")
            changes[FIELD_SECTION[name]][name] = value
        for name, cls in SECTIONS.items():
            section = given[name]
            if section is None:
                section = cls(**changes[name])
            elif not isinstance(section, cls):
                raise ConfigError(f"TrainConfig section {name} must be a {cls.__name__}, not {section!r}.")
            else:  # a copy even without changes: configs never share a section (`copy.seed = 1`)
                section = dataclasses.replace(section, **changes[name])
            object.__setattr__(self, name, section)
        self.__post_init__()

    def __post_init__(self) -> None:
        """The checks that span sections (a section checks its own fields when it is built)."""
        check = objective_facts(self.loss.objective).check
        if check is not None:  # the objective's own check (permutation: its clip length and classes)
            check(self)

    def __getattr__(self, name: str) -> Any:
        """Compatibility path: a flat setting name (`config.epochs`) reads the setting in its section."""
        section = FIELD_SECTION.get(name)
        if section is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(object.__getattribute__(self, section), name)

    def __setattr__(self, name: str, value: Any) -> None:
        """`config.epochs = 6` sets the setting in its section (as the flat TrainConfig did, unchecked)."""
        if name in FIELD_SECTION:
            setattr(getattr(self, FIELD_SECTION[name]), name, value)
        else:
            object.__setattr__(self, name, value)

    def validate(self) -> TrainConfig:
        """Ready to train: every value (as on construction) and exactly one data source; returns self."""
        for name in SECTIONS:
            getattr(self, name).__post_init__()
        self.__post_init__()
        self.frames.check_source()
        return self

    def to_dict(self) -> dict[str, Any]:
        """The nested form `{section: {name: value}}` in plain JSON types (tuples become lists) - safe for
        torch.load(weights_only=True); what train_config.json holds."""
        return {name: getattr(self, name).to_dict() for name in SECTIONS}

    def to_flat_dict(self) -> dict[str, Any]:
        """The old flat form `{name: value}` (what run folders saved before the sections existed)."""
        return flat_settings(self.to_dict())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Inverse of `to_dict`, and of the old flat form; an unknown key is a ConfigError naming it.

        A flat dict without `frame_store` was saved before the LMDB store existed: it trained from raw frames;
        a setting of ADDED_SETTINGS that `data` lacks reads as the value configs saved before it used.
        """
        settings: dict[str, Any] = {}
        nested = False
        for key, value in data.items():
            if key in SECTIONS and isinstance(value, Mapping):
                SECTIONS[key].check_names(value)
                settings.update({f"{key}.{name}": item for name, item in value.items()})
                nested = True
            elif key in FIELD_SECTION or "." in key:
                settings[key] = value
            else:
                cls._unknown(key)
        if not nested and "frame_store" not in data:
            settings["frame_store"] = "raw"
        given = {key.rpartition(".")[2] for key in settings}
        settings.update({key: value for key, value in ADDED_SETTINGS.items() if key not in given})
        return cls(**settings)

    @staticmethod
    def _unknown(key: str) -> None:
        raise ConfigError(
            f"Unknown training settings [{key!r}]; known: sections {list(SECTIONS)} or {sorted(FLAT_FIELDS)}."
        )

    def with_changes(self, **changes: Any) -> TrainConfig:
        """A checked copy with `changes` applied: flat names (`epochs=6`), `section.name` names (given as
        `**{"optim.epochs": 6}`) or whole sections (`optim=OptimConfig(...)`); None values are applied."""
        sections = {name: changes.pop(name) for name in list(changes) if name in SECTIONS}
        current = {name: sections.get(name) or getattr(self, name) for name in SECTIONS}
        return TrainConfig(**current, **changes)

    def replace(self, **changes: Any) -> TrainConfig:
        """`with_changes` ignoring None values, so CLI defaults do not override."""
        return self.with_changes(**{k: v for k, v in changes.items() if v is not None})
