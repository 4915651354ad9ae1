"""Converter tags, each declared once with its loader and its facts (`@register_converter`, like timm's
`@register_model`): clip encoder or not, what its feature vector is, the baseline a bare clip checkpoint
borrows its window from, whether it has weights.

Everything that lists or checks tags reads this table: `CONVERTERS`, `CLIP_CONVERTERS` (live views of the
tags, in registration order), `FEATURES`, `CLIP_DEFAULTS` and `LOADERS` (dicts kept in step with it). The
shipped loaders register in `hub/converters.py`; a new architecture registers its own beside its builder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, overload

from torch import nn

from plstitch_eval.data.video import ClipSampling
from plstitch_eval.errors import ConfigError
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.registry import Registry, import_modules, package_of


class Converted(NamedTuple):
    """What a loader gives: the module (eval mode), its eval preprocessing, dropped keys, a clip window."""

    model: nn.Module
    data_config: DataConfig
    dropped: list[str]
    clip: ClipSampling | None = None


# (checkpoint or None, registry entry or None, which network, source for messages) -> Converted
Loader = Callable[[Any, Any, str, str], Converted]


DEFAULT_FEATURE = "CLS token after the final norm"  # what ViT tags ("timm", "vit", "dinov3") give


@dataclass(frozen=True)
class ConverterInfo:
    """One converter tag: its loader and the facts cards, checks and bare checkpoints need of it."""

    name: str
    loader: Loader
    clip: bool = False  # one feature per window of frames: entries carry `ModelEntry.clip`
    feature: str = DEFAULT_FEATURE  # what its feature vector is (cards, docs)
    clip_default: str | None = (
        None  # registry entry whose window and preprocessing a bare clip checkpoint gets
    )
    weights: bool = True  # False: built in code, nothing to download or cache


# every converter tag (clip tags included): the shipped ones (`hub/converters.py`) on first use, then those an
# installed package's encoder module registers beside its entry (`plstitch.encoders`)
CONVERTER_INFO: Registry[ConverterInfo] = Registry(
    "converter", None, import_modules("plstitch_eval.hub", ("converters",))
)
LOADERS: dict[str, Loader] = {}  # tag -> loader (tests may patch one)
FEATURES: dict[str, str] = {}  # tag -> what its feature vector is
CLIP_DEFAULTS: dict[str, str] = {}  # clip tag -> registry baseline a bare checkpoint of its layout borrows


class TagNames(Sequence[str]):
    """The registered tags (or only the clip ones) as a read-only sequence that follows the registry."""

    def __init__(self, clip_only: bool = False) -> None:
        self.clip_only = clip_only

    def _names(self) -> tuple[str, ...]:
        return tuple(name for name, info in CONVERTER_INFO.items() if info.clip or not self.clip_only)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


CONVERTERS = TagNames()
CLIP_CONVERTERS = TagNames(clip_only=True)


def register_converter(
    name: str,
    loader: Loader | None = None,
    *,
    clip: bool = False,
    feature: str = DEFAULT_FEATURE,
    clip_default: str | None = None,
    weights: bool = True,
) -> Loader | Callable[[Loader], Loader]:
    """Declare converter tag `name` with its loader and facts; as `@register_converter(name, ...)` it
    decorates the loader. A tag taken by another package is refused, naming both; re-registering one's own
    tag (a module reloaded, a test's variant) replaces it in place, keeping its position."""

    def add(function: Loader) -> Loader:
        if clip != (clip_default is not None):
            raise ConfigError(
                f"Converter {name!r}: a clip converter names the registry baseline a bare checkpoint "
                "borrows its window from (clip_default=...), an image converter none."
            )
        info = ConverterInfo(name, function, clip, feature, clip_default, weights)
        if name in CONVERTER_INFO and CONVERTER_INFO.package(name) == package_of(function.__module__):
            CONVERTER_INFO[name] = info
        else:
            CONVERTER_INFO.register(name, info, package=package_of(function.__module__))
        LOADERS[name] = function
        FEATURES[name] = feature
        CLIP_DEFAULTS.pop(name, None)
        if clip_default is not None:
            CLIP_DEFAULTS[name] = clip_default
        return function

    return add(loader) if loader is not None else add


def unregister_converter(name: str) -> None:
    """Remove tag `name` (a test's toy converter); a tag that is not registered is ignored."""
    CONVERTER_INFO.unregister(name)
    for table in (LOADERS, FEATURES, CLIP_DEFAULTS):
        table.pop(name, None)


def converter_info(name: str) -> ConverterInfo:
    """The facts of tag `name`, or a one-line `ConfigError` listing the tags."""
    return CONVERTER_INFO.lookup(name)


def get_loader(converter: str) -> Loader:
    """The loader of a converter tag, or a one-line `ConfigError` listing the tags."""
    try:
        return LOADERS[converter]
    except KeyError:
        raise ConfigError(f"Unknown converter {converter!r}; choose one of {', '.join(LOADERS)}.") from None


__all__ = [
    "CLIP_CONVERTERS",
    "CLIP_DEFAULTS",
    "CONVERTERS",
    "CONVERTER_INFO",
    "DEFAULT_FEATURE",
    "FEATURES",
    "LOADERS",
    "ConverterInfo",
    "Converted",
    "Loader",
    "TagNames",
    "converter_info",
    "get_loader",
    "register_converter",
    "unregister_converter",
]
