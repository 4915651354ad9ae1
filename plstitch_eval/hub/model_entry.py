"""`ModelEntry`: one named encoder - where its weights live, its converter, preprocessing, licence, citation.

The registry (`hub/model_registry.py`) holds the entries; the families of `hub/models_*.py` define and
register them. Converter tags and their facts are declared once in `hub/converter_registry.py` (`CONVERTERS`,
`CLIP_CONVERTERS` and `FEATURES` are re-exported here); `hub/converters.py` registers the shipped loaders.
"""

from __future__ import annotations

import os
import re
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
            return self.local_path
        if self.repo_id:
            return f"{self.repo_id}/{self.filename}" if self.filename else self.repo_id
        return f"${self.path_env}" if self.path_env else "-"

    def resolve_local_path(self) -> Path | None:
        """The local weights path (from `local_path` or the `path_env` variable), if this entry has one."""
        raw = self.local_path or (os.environ.get(self.path_env) if self.path_env else None)
        if not raw:
            return None
        path = Path(raw).expanduser()
        return path if path.is_absolute() else package_path(*path.parts)


__all__ = ["CLIP_CONVERTERS", "CONVERTERS", "FEATURES", "ModelEntry"]
