"""Named encoders: where the weights live, how to convert them, how to preprocess, license and citation.

Adding a model is one `register(ModelEntry(...))` call beside its definition (`ModelEntry`:
`hub/model_entry.py`; `register`: `hub/model_registry.py`). Sources: a timm-format Hub repo (`repo_id`, no
`filename`), a raw checkpoint file in a Hub repo (`repo_id` + `filename`), or a local folder/file
(`local_path`; relative paths resolve inside the installed `plstitch_eval` package, where the shipped tiny
model lives as package data, so it is found from a wheel as well as from a checkout), or none at all
(converter "pixels": the `raw-pixels` reference encoder, built in code). Raw DINOv3 checkpoints (Meta's,
transformers' or timm's layout) use converter "dinov3". Clip encoders (converters "videomae", "timesformer",
"vjepa2") carry the window they see around each sampled frame (`clip`); see docs/baselines.md for every
baseline's window, preprocessing and licence with their sources.

This module gathers the registry: it imports the converter tags (`hub/converters.py`) and the shipped families
(`hub/families/plstitch.py`, `general.py`, `surgical.py`, `video.py`), each of which
registers its entries at their place in `plstitch models`; a new family module is one more import below. The
family constants are re-exported for the import paths that name them here.
"""

from __future__ import annotations

import plstitch_eval.hub.converters  # noqa: F401  (registers the converter tags)
from plstitch_eval.hub.converter_registry import CLIP_CONVERTERS, CONVERTERS, FEATURES
from plstitch_eval.hub.families.general import (
    DINO_CITATION,
    DINO_EVAL,
    DINO_EVAL_SOURCE,
    DINOV3_CITATION,
    DINOV3_LICENSE_SOURCE,
    DINOV3_PREPROCESSING_SOURCE,
    DINOV3_SIZES,
    T_CORE_PREPROCESSING_SOURCE,
    VIT_B16,
)
from plstitch_eval.hub.families.plstitch import (
    PL_STITCH_CITATION,
    PL_STITCH_EVAL,
    PL_STITCH_PREPROCESSING_SOURCE,
)
from plstitch_eval.hub.families.surgical import (
    SURGENET_CITATION,
    SURGENET_LICENSE_SOURCE,
    SURGENET_MODELS,
    SURGENET_PREPROCESSING_SOURCE,
    SURGENET_REPO,
)
from plstitch_eval.hub.families.video import (
    ENDO_FM_CLIP,
    ENDO_FM_EVAL,
    ENDO_FM_PREPROCESSING_SOURCE,
    VIDEOMAE_V2_CLIP,
    VIDEOMAE_V2_EVAL,
    VIDEOMAE_V2_PREPROCESSING_SOURCE,
    VJEPA2_CLIP,
    VJEPA2_EVAL,
    VJEPA2_PREPROCESSING_SOURCE,
)
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.model_registry import (
    MODELS,
    close_model_names,
    did_you_mean,
    get_model_entry,
    list_models,
    register,
    registered,
    unregister,
)

# the shipped entries, in the order `plstitch models` lists them (each family registers its own)
SHIPPED_MODELS = tuple(list_models())

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
    "registered",
    "unregister",
]
