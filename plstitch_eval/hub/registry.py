"""Named encoders: where the weights live, how to convert them, how to preprocess, license and citation.

Adding a model is one `register(ModelEntry(...))` call (`ModelEntry`: `hub/model_entry.py`). Sources: a
timm-format Hub repo (`repo_id`, no `filename`), a raw checkpoint file in a Hub repo (`repo_id` + `filename`),
or a local folder/file (`local_path`; relative paths resolve inside the installed `plstitch_eval` package,
where the shipped tiny model lives as package data, so it is found from a wheel as well as from a checkout),
or none at all (converter "pixels": the `raw-pixels` reference encoder, built in code). Raw DINOv3
checkpoints (Meta's, transformers' or timm's layout) use converter "dinov3". Clip encoders (converters
"videomae", "timesformer", "vjepa2") carry the window they see around each sampled frame (`clip`); see
docs/baselines.md for every baseline's window, preprocessing and licence with their sources.

The shipped entries are defined by family in `hub/models_plstitch.py`, `models_general.py`,
`models_surgical.py` and `models_video.py`, and registered here in the order `plstitch models` lists them;
each converter tag's loader is in `hub/converters.py`.
"""

from __future__ import annotations

import difflib

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.model_entry import CLIP_CONVERTERS, CONVERTERS, FEATURES, ModelEntry
from plstitch_eval.hub.models_general import (
    DINO_CITATION,
    DINO_EVAL,
    DINO_EVAL_SOURCE,
    DINO_VITB16,
    DINOV2_VITB14,
    DINOV2_VITB14_REG,
    DINOV3_CITATION,
    DINOV3_LICENSE_SOURCE,
    DINOV3_MODELS,
    DINOV3_PREPROCESSING_SOURCE,
    DINOV3_SIZES,
    IBOT_VITB16,
    MAE_VITB16,
    RAW_PIXELS,
    T_CORE_PREPROCESSING_SOURCE,
    T_CORE_VITB16,
    VIT_B16,
)
from plstitch_eval.hub.models_plstitch import (
    IBOT_TINY,
    PL_STITCH_CITATION,
    PL_STITCH_EVAL,
    PL_STITCH_PREPROCESSING_SOURCE,
    PL_STITCH_RELEASES,
    PLSTITCH_TINY,
)
from plstitch_eval.hub.models_surgical import (
    ENDOVIT,
    LEMONFM,
    SURGENET_CITATION,
    SURGENET_ENTRIES,
    SURGENET_LICENSE_SOURCE,
    SURGENET_MODELS,
    SURGENET_PREPROCESSING_SOURCE,
    SURGENET_REPO,
)
from plstitch_eval.hub.models_video import (
    ENDO_FM,
    ENDO_FM_CLIP,
    ENDO_FM_EVAL,
    ENDO_FM_PREPROCESSING_SOURCE,
    VIDEOMAE_V2_CLIP,
    VIDEOMAE_V2_EVAL,
    VIDEOMAE_V2_PREPROCESSING_SOURCE,
    VIDEOMAEV2_VITB16,
    VIDEOMAEV2_VITL16,
    VJEPA2_CLIP,
    VJEPA2_EVAL,
    VJEPA2_PREPROCESSING_SOURCE,
    VJEPA2_VITL16,
)

MODELS: dict[str, ModelEntry] = {}


def register(entry: ModelEntry) -> ModelEntry:
    """Add (or replace) a registry entry; returns it so it can be used as a constant."""
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
    MODELS[entry.name] = entry
    return entry


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
    """All entries, in registration order."""
    return list(MODELS.values())


# the order `plstitch models` (and every listing of the registry) shows: PL-Stitch's releases, the baselines
# of the paper, those of 2026, then the shipped tiny model and the raw-pixels reference row
SHIPPED_MODELS = (
    *PL_STITCH_RELEASES,
    DINO_VITB16,
    MAE_VITB16,
    DINOV2_VITB14,
    DINOV2_VITB14_REG,
    IBOT_VITB16,
    LEMONFM,
    ENDOVIT,
    T_CORE_VITB16,
    VIDEOMAEV2_VITB16,
    ENDO_FM,
    *DINOV3_MODELS,
    *SURGENET_ENTRIES,
    VJEPA2_VITL16,
    VIDEOMAEV2_VITL16,
    PLSTITCH_TINY,
    IBOT_TINY,
    RAW_PIXELS,
)
for _entry in SHIPPED_MODELS:
    register(_entry)

__all__ = [
    "CLIP_CONVERTERS",
    "CONVERTERS",
    "DINOV3_CITATION",
    "DINOV3_LICENSE_SOURCE",
    "DINOV3_PREPROCESSING_SOURCE",
    "DINOV3_SIZES",
    "DINO_CITATION",
    "DINO_EVAL",
    "DINO_EVAL_SOURCE",
    "ENDO_FM_CLIP",
    "ENDO_FM_EVAL",
    "ENDO_FM_PREPROCESSING_SOURCE",
    "FEATURES",
    "MODELS",
    "PL_STITCH_CITATION",
    "PL_STITCH_EVAL",
    "PL_STITCH_PREPROCESSING_SOURCE",
    "SHIPPED_MODELS",
    "SURGENET_CITATION",
    "SURGENET_LICENSE_SOURCE",
    "SURGENET_MODELS",
    "SURGENET_PREPROCESSING_SOURCE",
    "SURGENET_REPO",
    "T_CORE_PREPROCESSING_SOURCE",
    "VIDEOMAE_V2_CLIP",
    "VIDEOMAE_V2_EVAL",
    "VIDEOMAE_V2_PREPROCESSING_SOURCE",
    "VIT_B16",
    "VJEPA2_CLIP",
    "VJEPA2_EVAL",
    "VJEPA2_PREPROCESSING_SOURCE",
    "ModelEntry",
    "close_model_names",
    "did_you_mean",
    "get_model_entry",
    "list_models",
    "register",
]
