"""Registry entries of PL-Stitch itself: the authors' three released teachers, the shipped tiny model and the
shipped tiny MIM initialisation its CPU reproduction starts from.

Each entry is registered where it is defined, at its place in `plstitch models` (`listing`).
"""

from __future__ import annotations

import plstitch_eval.hub.converters  # noqa: F401  (registers the converter tags these entries name)
from plstitch_eval.hub.families.general import VIT_B16
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.model_registry import RELEASES, SHIPPED, register
from plstitch_eval.preprocess import DataConfig

PL_STITCH_CITATION = (
    "Che et al. A Stitch in Time: Learning Procedural Workflow via Self-Supervised Plackett-Luce Ranking. "
    "CVPR 2026."
)
# PL-Stitch's authors feed the whole frame at 224x224 (README `img.resize((224, 224))`, LMDB writer
# `cv2.resize(img, (224, 224))`, bilinear), then ImageNet mean/std (downstream/load_lmdb_*.py)
PL_STITCH_EVAL = DataConfig.whole_frame(224, interpolation="bilinear")
PL_STITCH_PREPROCESSING_SOURCE = (
    "github.com/visurg-ai/PL-Stitch: create_lmdb.py resizes every frame to 224x224 (cv2.resize, bilinear), "
    "downstream/load_lmdb_autolaparo.py normalises with ImageNet mean/std; README: img.resize((224, 224))"
)
PL_STITCH_DATASETS = ("lemon", "breakfast", "gtea")  # one released teacher per pretraining dataset


def pl_stitch_release(dataset: str) -> ModelEntry:
    """The authors' ViT-B/16 teacher pretrained on `dataset` (`pl_<dataset>.pth` of visurg/PL-Stitch)."""
    return ModelEntry(
        name=f"pl-stitch-{dataset}",
        architecture="vit_base_patch16",
        feature_dim=768,
        data_config=PL_STITCH_EVAL,
        converter="vit",
        expected=VIT_B16,
        repo_id="visurg/PL-Stitch",
        filename=f"pl_{dataset}.pth",
        license="MIT",
        license_source="github.com/visurg-ai/PL-Stitch LICENSE (MIT, Copyright (c) 2025 Chengan Che)",
        preprocessing_source=PL_STITCH_PREPROCESSING_SOURCE,
        citation=PL_STITCH_CITATION,
        description=f"PL-Stitch ViT-B/16 teacher pretrained on {dataset.capitalize()}.",
    )


PL_STITCH_RELEASES = tuple(
    register(pl_stitch_release(dataset), listing=RELEASES + rank)
    for rank, dataset in enumerate(PL_STITCH_DATASETS)
)

PLSTITCH_TINY = register(
    ModelEntry(
        name="plstitch-tiny-synthetic",
        architecture="vit_tiny_patch8_64",
        feature_dim=64,
        converter="timm",
        local_path="model_cards/plstitch-tiny-synthetic",
        license="MIT",
        license_source="this package (pyproject.toml: MIT)",
        preprocessing_source="its timm config.json (written by `plstitch train`)",
        citation=PL_STITCH_CITATION,
        description="Tiny PL-Stitch ViT (4 blocks x 64, 64 px) trained on the synthetic dataset; shipped.",
    ),
    listing=SHIPPED,
)

IBOT_TINY = register(
    ModelEntry(
        name="ibot-tiny-synthetic",
        architecture="vit_tiny_patch8_64",
        feature_dim=64,
        converter="timm",
        local_path="model_cards/ibot-tiny-synthetic",
        license="MIT",
        license_source="this package (pyproject.toml: MIT)",
        preprocessing_source="its timm config.json (written by `plstitch train`)",
        citation=PL_STITCH_CITATION,
        description=(
            "Tiny ViT (4 blocks x 64, 64 px) pretrained by MIM alone on the synthetic dataset; the shared "
            "initialisation of `plstitch reproduce`, standing in for ImageNet iBOT. Shipped."
        ),
    ),
    listing=SHIPPED + 1,
)
