"""Registry entries of surgical image encoders: LemonFM, EndoViT and SurgeNetDINO (DINOv1/v2/v3).

Each entry is registered where it is defined, at its place in `plstitch models` (`listing`). Endo-FM, a
clip encoder, is with the video models (`hub/families/video.py`).
"""

from __future__ import annotations

from typing import Any

import plstitch_eval.hub.converters  # noqa: F401  (registers the converter tags these entries name)
from plstitch_eval.hub.families.general import DINOV3_SIZES, VIT_B16
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.model_registry import BASELINES_2026, PAPER_BASELINES, register
from plstitch_eval.preprocess import DataConfig

LEMONFM = register(
    ModelEntry(
        name="lemonfm",
        architecture="convnext_large",
        feature_dim=1536,
        data_config=DataConfig.whole_frame(224, interpolation="bilinear"),
        converter="convnext",
        # ConvNeXt-Large exactly: depths and widths pinned, so a Base (1024-d) teacher is refused
        expected={"depths": [3, 3, 27, 3], "dims": [192, 384, 768, 1536]},
        repo_id="visurg/LemonFM",
        # The Hub file name is not published in text we could read; every download script that names it
        # uses `lemonfm.pth` and the LEMON repo renamed its code to lowercase `lemonfm/lemonfm.py`; the README
        # examples say `path/to/our/LemonFM.pth`. Both spellings are tried (Hub names are case-sensitive).
        filename="lemonfm.pth",
        filename_alternatives=("LemonFM.pth",),
        license="unknown",
        license_source="not stated: github.com/visurg-ai/LEMON licenses only the dataset metadata and "
        "annotations (CC BY 4.0) and has no LICENSE file; check huggingface.co/visurg/LemonFM before use",
        preprocessing_source="github.com/visurg-ai/LEMON: src/create_lmdb.py resizes frames to 224x224 "
        "(cv2.resize, bilinear), downstream/load_lmdb.py normalises with ImageNet mean/std; README: "
        "img.resize((224, 224))",
        citation="Che et al. LEMON: a large endoscopic monocular dataset and foundation model for perception "
        "in surgical settings (LemonFM).",
        description="LemonFM torchvision ConvNeXt-Large teacher (keys under 'teacher', prefix 'backbone.').",
    ),
    listing=PAPER_BASELINES + 5,
)
ENDOVIT = register(
    ModelEntry(
        name="endovit",
        architecture="vit_base_patch16",
        feature_dim=768,
        # whole frame to 224x224 (T.Resize((224, 224)): bilinear), EndoViT's own Cholec80 statistics
        data_config=DataConfig.whole_frame(
            224, interpolation="bilinear", mean=(0.3464, 0.2280, 0.2228), std=(0.2520, 0.2128, 0.2093)
        ),
        converter="vit",
        expected=VIT_B16,
        repo_id="egeozsoy/EndoViT",
        filename="pytorch_model.bin",
        license="Apache-2.0",
        license_source="huggingface.co/egeozsoy/EndoViT model card (license: apache-2.0)",
        preprocessing_source="huggingface.co/egeozsoy/EndoViT model card, process_single_image: "
        "T.Resize((224, 224)), mean [0.3464, 0.2280, 0.2228], std [0.2520, 0.2128, 0.2093]",
        citation="Batic et al. EndoViT: pretraining vision transformers on a large collection of endoscopic "
        "images. IJCARS 2024.",
        description="EndoViT ViT-B/16 MAE encoder (endoscopy); decoder keys are dropped.",
    ),
    listing=PAPER_BASELINES + 6,
)

# SurgeNetDINO (MIDL 2026): DINOv1/v2/v3 pretrained on SurgeNetXL; README download table and load_models.py
# (the README calls it load_weights.py) name the files; no evaluation transform is published, so frames get
# the DINO evaluation transform at each model's pretraining size (224 for DINOv1, 336 for DINOv2/v3)
SURGENET_REPO = "rlpddejong/SurgeNetXL_DINOv1-v3"
SURGENET_CITATION = (
    "de Jong et al. Towards Effective Surgical Representation Learning with DINO Models. MIDL 2026."
)
SURGENET_LICENSE_SOURCE = (
    "github.com/rlpddejong/SurgeNetDINO README 'License' (added 2026-03-02, commit 4defa3b): pretrained "
    "weights CC-BY-NC-SA, non-commercial share-alike, text in LICENSE_MODELS.txt (CC BY-NC-SA 4.0); code MIT "
    "(LICENSE.txt). The Hub repo's own card was not readable here"
)
SURGENET_PREPROCESSING_SOURCE = (
    "github.com/rlpddejong/SurgeNetDINO publishes no evaluation transform: load_models.py builds timm models "
    "at img_size 224 (DINOv1) / 336 (DINOv2, DINOv3), the pretraining configs' global crop size "
    "(dinov2_configs/, dinov3_configs/: global_crops_size 336); frames get the DINO evaluation transform at "
    "that size (shorter side size/0.875 bicubic, centre crop, ImageNet mean/std); feature = CLS after the "
    "final norm"
)
SURGENET_MODELS = (  # (name, version, size letter, patch, input px, embed_dim, depth)
    ("dinov1", "DINOv1", "s", 16, 224, 384, 12),
    ("dinov1", "DINOv1", "b", 16, 224, 768, 12),
    ("dinov2", "DINOv2", "s", 14, 336, 384, 12),
    ("dinov2", "DINOv2", "b", 14, 336, 768, 12),
    ("dinov2", "DINOv2", "l", 14, 336, 1024, 24),
    ("dinov3", "DINOv3", "s", 16, 336, 384, 12),
    ("dinov3", "DINOv3", "b", 16, 336, 768, 12),
    ("dinov3", "DINOv3", "l", 16, 336, 1024, 24),
)


def surgenet(version: str, title: str, size: str, patch: int, px: int, dim: int, depth: int) -> ModelEntry:
    """One SurgeNetDINO ViT (a row of `SURGENET_MODELS`): DINOv1/v2 as timm ViTs, DINOv3 as timm's Eva."""
    pinned: dict[str, Any] = {"embed_dim": dim, "depth": depth, "patch_size": (patch, patch)}
    if version != "dinov3":  # learned position tables: the pretraining size is in the tensors
        pinned["img_size"] = (px, px)
    return ModelEntry(
        name=f"surgenet-{version}-vit{size}{patch}",
        architecture=f"vit_{DINOV3_SIZES[size][0]}_patch{patch}" + ("_dinov3" if version == "dinov3" else ""),
        feature_dim=dim,
        data_config=DataConfig.for_size(px, interpolation="bicubic"),
        converter="dinov3" if version == "dinov3" else "vit",
        expected=pinned,
        # SurgeNetDINO's DINOv3 configs: norm_layer "layernorm" (eps 1e-6 in dinov3's norm_layer_dict)
        model_args={"norm_eps": 1e-6} if version == "dinov3" else {},
        repo_id=SURGENET_REPO,
        filename=f"{title}_ViT{size}{patch}_size{px}_SurgeNetXL.pth",
        license="CC-BY-NC-SA-4.0",
        license_source=SURGENET_LICENSE_SOURCE,
        preprocessing_source=SURGENET_PREPROCESSING_SOURCE,
        citation=SURGENET_CITATION,
        description=f"SurgeNetDINO {title} ViT-{size.upper()}/{patch} pretrained on SurgeNetXL "
        f"(surgical video frames) at {px} px: CLS feature.",
    )


SURGENET_ENTRIES = tuple(  # listed after the six DINOv3 entries of `general.py`
    register(surgenet(*row), listing=BASELINES_2026 + 6 + rank) for rank, row in enumerate(SURGENET_MODELS)
)
