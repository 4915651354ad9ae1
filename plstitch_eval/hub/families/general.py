"""Registry entries of general-purpose image encoders: DINO, MAE, DINOv2, iBOT, T-CoRe, DINOv3, raw pixels.

Each entry is registered where it is defined, at its place in `plstitch models` (`listing`).
"""

from __future__ import annotations

import math

import plstitch_eval.hub.converters  # noqa: F401  (registers the converter tags these entries name)
from plstitch_eval.hub.architectures.pixels import PIXELS_DATA_CONFIG
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.model_registry import BASELINES_2026, PAPER_BASELINES, SHIPPED, register
from plstitch_eval.preprocess import DataConfig

DINO_EVAL = DataConfig(input_size=(3, 224, 224), resize_size=256, crop_pct=0.875, interpolation="bicubic")

DINO_EVAL_SOURCE = (
    "DINO/iBOT/DINOv2 k-NN and linear evaluation: resize shorter side 256 (bicubic), centre crop 224, "
    "ImageNet mean/std (github.com/facebookresearch/dino eval_knn.py)"
)
VIT_B16 = {"embed_dim": 768, "depth": 12, "num_heads": 12, "patch_size": (16, 16)}
DINO_CITATION = "Caron et al. Emerging Properties in Self-Supervised Vision Transformers. ICCV 2021."

# T-CoRe publishes only dense label propagation (whole frames at 480x880, ImageNet mean/std); its backbone is
# DINOv2's ViT trained on 224 crops, so frame-level k-NN / linear features use DINOv2's evaluation transform.
T_CORE_PREPROCESSING_SOURCE = (
    "github.com/yafeng19/T-CORE: base_model/ is DINOv2's code (trained at global_crops_size 224, "
    "base_model/configs/ssl_default_config.yaml); its only evaluation, "
    "downstreams/propagation/src/data/vos.py, resizes whole frames to 480x880 (cv2) for dense label "
    "propagation with ImageNet mean/std. Frame features: " + DINO_EVAL_SOURCE
)

DINO_VITB16 = register(
    ModelEntry(
        name="dino-vitb16",
        architecture="vit_base_patch16",
        feature_dim=768,
        data_config=DINO_EVAL,
        converter="timm",
        repo_id="timm/vit_base_patch16_224.dino",
        license="Apache-2.0",
        license_source="github.com/facebookresearch/dino LICENSE (Apache 2.0); timm model card",
        preprocessing_source=DINO_EVAL_SOURCE,
        citation=DINO_CITATION,
        description="DINO ViT-B/16 (ImageNet-1k, self-supervised).",
    ),
    listing=PAPER_BASELINES,
)
MAE_VITB16 = register(
    ModelEntry(
        name="mae-vitb16",
        architecture="vit_base_patch16",
        feature_dim=768,
        data_config=DINO_EVAL,
        converter="timm",
        repo_id="timm/vit_base_patch16_224.mae",
        license="CC-BY-NC-4.0",
        license_source="github.com/facebookresearch/mae LICENSE (CC BY-NC 4.0); timm model card",
        preprocessing_source=DINO_EVAL_SOURCE,
        citation="He et al. Masked Autoencoders Are Scalable Vision Learners. CVPR 2022.",
        description="MAE ViT-B/16 encoder (ImageNet-1k).",
    ),
    listing=PAPER_BASELINES + 1,
)
DINOV2_VITB14 = register(
    ModelEntry(
        name="dinov2-vitb14",
        architecture="vit_base_patch14",
        feature_dim=768,
        data_config=DINO_EVAL,
        converter="timm",
        repo_id="timm/vit_base_patch14_dinov2.lvd142m",
        model_args={"img_size": 224},  # evaluated at 224 (16x16 patches); pos_embed resampled by timm
        license="Apache-2.0",
        license_source="github.com/facebookresearch/dinov2 LICENSE (Apache 2.0); timm model card",
        preprocessing_source=DINO_EVAL_SOURCE
        + "; DINOv2 evaluates ViT-B/14 at 224 (dinov2/data/transforms.py)",
        citation="Oquab et al. DINOv2: Learning Robust Visual Features without Supervision. TMLR 2024.",
        description="DINOv2 ViT-B/14 (LVD-142M), run at 224 px.",
    ),
    listing=PAPER_BASELINES + 2,
)
DINOV2_VITB14_REG = register(
    ModelEntry(
        name="dinov2-vitb14-reg",
        architecture="vit_base_patch14_reg4",
        feature_dim=768,
        data_config=DINO_EVAL,
        converter="timm",
        repo_id="timm/vit_base_patch14_reg4_dinov2.lvd142m",
        # at 224 timm resamples the patch position grid bicubic with antialias, as dinov2_vitb14_reg does
        model_args={"img_size": 224},
        license="Apache-2.0",
        license_source="github.com/facebookresearch/dinov2 LICENSE (Apache 2.0); timm model card",
        preprocessing_source=DINO_EVAL_SOURCE
        + "; DINOv2 evaluates ViT-B/14 at 224 (dinov2/data/transforms.py)",
        citation="Darcet et al. Vision Transformers Need Registers. ICLR 2024.",
        description="DINOv2 ViT-B/14 with 4 registers (LVD-142M), run at 224 px; CLS feature.",
    ),
    listing=PAPER_BASELINES + 3,
)
IBOT_VITB16 = register(
    ModelEntry(
        name="ibot-vitb16",
        architecture="vit_base_patch16",
        feature_dim=768,
        data_config=DINO_EVAL,
        converter="vit",
        expected=VIT_B16,
        path_env="PLSTITCH_IBOT_CHECKPOINT",
        license="Apache-2.0",
        license_source="github.com/bytedance/ibot LICENSE (Apache 2.0)",
        preprocessing_source=DINO_EVAL_SOURCE,
        citation="Zhou et al. iBOT: Image BERT Pre-Training with Online Tokenizer. ICLR 2022.",
        description="iBOT ViT-B/16 authors' checkpoint.pth; set $PLSTITCH_IBOT_CHECKPOINT or pass its path.",
    ),
    listing=PAPER_BASELINES + 4,
)
T_CORE_VITB16 = register(
    ModelEntry(
        name="t-core-vitb16",
        architecture="vit_base_patch16_reg4",
        feature_dim=768,
        data_config=DINO_EVAL,
        converter="vit",
        # DINOv2's ViT-B/16 as T-CoRe builds it: 4 register tokens, layer scale (ssl_default_config.yaml)
        expected={**VIT_B16, "reg_tokens": 4},
        repo_id="yafeng19/T-CORE",
        filename="ckpt/vitb16_200ep_K400.pth",
        path_env="PLSTITCH_TCORE_CHECKPOINT",
        license="Apache-2.0",
        license_source="github.com/yafeng19/T-CORE LICENSE (Apache 2.0); the README links the weights "
        "(huggingface.co/yafeng19/T-CORE) without another licence",
        preprocessing_source=T_CORE_PREPROCESSING_SOURCE,
        citation="Liu et al. When the Future Becomes the Past: Taming Temporal Correspondence for "
        "Self-supervised Video Representation Learning. CVPR 2025.",
        description="T-CoRe ViT-B/16 (DINOv2-style, 4 registers; Kinetics-400, 200 epochs); CLS feature. "
        "$PLSTITCH_TCORE_CHECKPOINT loads your own checkpoint in its layout instead.",
    ),
    listing=PAPER_BASELINES + 7,
)

DINOV3_CITATION = "Simeoni et al. DINOv3. arXiv:2508.10104, 2025."
DINOV3_LICENSE_SOURCE = (
    "github.com/facebookresearch/dinov3 LICENSE.md (DINOv3 License, a custom licence) and README 'License'; "
    "the facebook/dinov3-* Hub repos are gated (accept the licence on the model page), timm's copies are "
    "tagged license: other (dinov3-license)"
)
# DINOv3's k-NN and linear evaluations (dinov3/eval/knn.py, linear.py) use make_classification_eval_transform:
# resize 256 (bicubic), centre crop 224, ImageNet mean/std, the DINO evaluation transform
DINOV3_PREPROCESSING_SOURCE = (
    "github.com/facebookresearch/dinov3: dinov3/eval/knn.py and linear.py use "
    "dinov3/data/transforms.py make_classification_eval_transform (resize 256 bicubic, centre crop 224, "
    "ImageNet mean/std); feature = CLS after the final norm (x_norm_clstoken)"
)
DINOV3_SIZES = {  # timm name, embed_dim, depth, heads
    "s": ("small", 384, 12, 6),
    "b": ("base", 768, 12, 12),
    "l": ("large", 1024, 24, 16),
}


def dinov3_timm(size: str) -> ModelEntry:
    """timm's port of the DINOv3 ViT of `size` ("s", "b", "l"; `DINOV3_SIZES`): a timm-format Hub repo."""
    timm_name, dim, _, _ = DINOV3_SIZES[size]
    return ModelEntry(
        name=f"dinov3-vit{size}16",
        architecture=f"vit_{timm_name}_patch16_dinov3",
        feature_dim=dim,
        data_config=DINO_EVAL,
        converter="timm",
        repo_id=f"timm/vit_{timm_name}_patch16_dinov3.lvd1689m",
        license="DINOv3 License",
        license_source=DINOV3_LICENSE_SOURCE,
        preprocessing_source=DINOV3_PREPROCESSING_SOURCE
        + "; timm's port computes its RoPE periods in float32 (Meta's files store them bf16-rounded)",
        citation=DINOV3_CITATION,
        description=f"DINOv3 ViT-{size.upper()}/16 distilled on LVD-1689M (timm's port, 4 registers): "
        "CLS feature at 224 px.",
    )


def dinov3_facebook(size: str) -> ModelEntry:
    """Meta's gated release of the DINOv3 ViT of `size`: one safetensors file in transformers' layout."""
    timm_name, dim, depth, heads = DINOV3_SIZES[size]
    return ModelEntry(
        name=f"dinov3-vit{size}16-facebook",
        architecture=f"vit_{timm_name}_patch16_dinov3",
        feature_dim=dim,
        data_config=DINO_EVAL,
        converter="dinov3",
        expected={"embed_dim": dim, "depth": depth, "num_heads": heads, "patch_size": (16, 16)},
        repo_id=f"facebook/dinov3-vit{size}16-pretrain-lvd1689m",
        filename="model.safetensors",
        gated=True,
        license="DINOv3 License",
        license_source=DINOV3_LICENSE_SOURCE,
        preprocessing_source=DINOV3_PREPROCESSING_SOURCE,
        citation=DINOV3_CITATION,
        description=f"DINOv3 ViT-{size.upper()}/16 (LVD-1689M) from Meta's gated Hub repo (transformers "
        "layout, converted to timm's Eva with every tensor): CLS feature at 224 px.",
    )


# each size's timm port, then Meta's release of it
DINOV3_MODELS = tuple(entry for size in DINOV3_SIZES for entry in (dinov3_timm(size), dinov3_facebook(size)))
for _rank, _entry in enumerate(DINOV3_MODELS):
    register(_entry, listing=BASELINES_2026 + _rank)

RAW_PIXELS = register(
    ModelEntry(
        name="raw-pixels",
        architecture="pixels_8x8x3",
        feature_dim=math.prod(PIXELS_DATA_CONFIG.input_size),  # 192
        converter="pixels",
        data_config=PIXELS_DATA_CONFIG,
        license="n/a (no weights)",
        license_source="n/a",
        preprocessing_source="plstitch_eval/hub/architectures/pixels.py",
        citation="n/a (reference row: no model)",
        description="reference row: each frame downsampled to 8x8x3, no learning",
    ),
    listing=SHIPPED + 2,
)
