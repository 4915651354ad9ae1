"""`ModelEntry`: one named encoder - where its weights live, its converter, preprocessing, licence, citation.

The registry (`hub/model_registry.py`) holds the entries; the families of `hub/models_*.py` define and
register them. Converter tags and their facts are declared once in `hub/converter_registry.py` (`CONVERTERS`,
`CLIP_CONVERTERS` and `FEATURES` are re-exported here); `hub/converters.py` registers the shipped loaders.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.data.video import ClipSampling
from plstitch_eval.hub.converter_registry import (
    CLIP_CONVERTERS,
    CONVERTER_INFO,
    CONVERTERS,
    DEFAULT_FEATURE,
    FEATURES,
)
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.resources import package_path


@dataclass(frozen=True)
class ModelEntry:
    """One named encoder. `converter`: "timm" (timm-format folder), "vit", "convnext" or "dinov3" (raw
    checkpoint), "pixels" (no weights: `plstitch_eval.hub.architectures.pixels`), "videomae", "timesformer" or
    "vjepa2" (raw clip checkpoint)."""

    name: str
    architecture: str
    feature_dim: int
    converter: str
    data_config: DataConfig | None = None  # None: use the source's own config (timm folder) or 224 defaults
    repo_id: str | None = None
    filename: str | None = None
    local_path: str | None = None
    path_env: str | None = None
    # timm.create_model overrides (timm folders); converter options for "dinov3" (norm_eps)
    model_args: dict[str, Any] = field(default_factory=dict)
    expected: dict[str, Any] | None = (
        None  # sizes a raw checkpoint must have (shapes cannot show a lost block)
    )
    license: str = "unknown"
    citation: str = ""
    description: str = ""
    license_source: str = ""  # where the licence is stated
    preprocessing_source: str = ""  # where the authors' eval transform is stated
    filename_alternatives: tuple[str, ...] = ()  # other spellings of `filename` tried when it is absent
    clip: ClipSampling | None = None  # clip encoders: the window of frames around each sampled frame
    gated: bool = False  # the Hub repo asks each user to accept its licence before downloading
    # the module that created the entry (set on creation): a relative `local_path` lies in its package
    defined_in: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.defined_in is None:
            object.__setattr__(self, "defined_in", _creating_module())

    @property
    def non_commercial(self) -> bool:
        """True when the weights' licence forbids commercial use: a Creative Commons NC licence
        (`CC-BY-NC-4.0`, `CC-BY-NC-SA-4.0`) or one that says non-commercial."""
        words = re.split(r"[^A-Z]+", self.license.upper())
        return "NC" in words or "NONCOMMERCIAL" in words or "NON-COMMERCIAL" in self.license.upper()

    @property
    def feature_description(self) -> str:
        """What the feature vector is (`FEATURES`; ViTs: the CLS token after the final norm)."""
        return FEATURES.get(self.converter, DEFAULT_FEATURE)

    @property
    def has_weights(self) -> bool:
        """False for encoders built in code (a converter registered with `weights=False`, e.g. "pixels"):
        nothing to download or cache."""
        info = CONVERTER_INFO.get(self.converter)
        return info.weights if info is not None else True

    @property
    def filenames(self) -> tuple[str, ...]:
        """`filename` and its alternative spellings, in the order they are tried (empty for timm repos)."""
        return (self.filename, *self.filename_alternatives) if self.filename else ()

    @property
    def source(self) -> str:
        """Human-readable location of the weights (repo/file, local path or the env variable to set)."""
        if not self.has_weights:
            return "built in (no weights)"
        if self.local_path:
            return f"{self.local_path} (or ${self.path_env})" if self.path_env else self.local_path
        if self.repo_id:
            return f"{self.repo_id}/{self.filename}" if self.filename else self.repo_id
        return f"${self.path_env}" if self.path_env else "-"

    def resolve_local_path(self) -> Path | None:
        """The local weights path, if this entry has one: the `path_env` variable when it is set, else
        `local_path`. A relative path lies inside the package of the module that created the entry
        (`defined_in`: plstitch's own `plstitch_eval`, or a plugin's package): a plugin ships or makes its
        weights beside its code; a path found only inside `plstitch_eval` (`model_cards/...`) is used."""
        raw = (os.environ.get(self.path_env) if self.path_env else None) or self.local_path
        if not raw:
            return None
        path = Path(raw).expanduser()
        if path.is_absolute():
            return path
        shipped = package_path(*path.parts)
        home = _package_dir(self.defined_in)
        if home is None or (not (home / path).exists() and shipped.exists()):
            return shipped
        return home / path


_OWN_PACKAGES = ("plstitch_eval", "plstitch_train")
_PLUMBING = (__name__, "dataclasses")  # creating frames that only pass the creation on


def _creating_module() -> str | None:
    """The module whose code created the entry: the first caller outside this module and `dataclasses`."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") in _PLUMBING:
        frame = frame.f_back
    return frame.f_globals.get("__name__") if frame is not None else None


def _package_dir(module: str | None) -> Path | None:
    """The folder of the top-level package of `module` (a plugin's package); None for plstitch's own modules
    and for a module not imported (then `package_path`, inside `plstitch_eval`, is the base)."""
    top = (module or "").split(".")[0]
    loaded = sys.modules.get(top) if top and top not in _OWN_PACKAGES else None
    if loaded is None:
        return None
    if getattr(loaded, "__path__", None):  # a package (a namespace package has no __file__)
        return Path(next(iter(loaded.__path__)))
    return Path(loaded.__file__).parent if getattr(loaded, "__file__", None) else None


__all__ = ["CLIP_CONVERTERS", "CONVERTERS", "FEATURES", "ModelEntry"]
