"""Named encoders: where the weights live, how to convert them, how to preprocess, license and citation.

Adding a model is one `register(ModelEntry(...))` call. Sources: a timm-format Hub repo (`repo_id`, no
`filename`), a raw checkpoint file in a Hub repo (`repo_id` + `filename`), or a local folder/file
(`local_path`; relative paths resolve inside the installed `plstitch_eval` package, where the shipped tiny
model lives as package data, so it is found from a wheel as well as from a checkout), or none at all
(converter "pixels": the `raw-pixels` reference encoder, built in code). Raw DINOv3 checkpoints (Meta's,
transformers' or timm's layout) use converter "dinov3". Clip encoders (converters "videomae", "timesformer",
"vjepa2") carry the window they see around each sampled frame (`clip`); see docs/baselines.md for every
baseline's window, preprocessing and licence with their sources.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.data.video import ClipSampling
from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.pixels import PIXELS_DATA_CONFIG
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.resources import package_path

DINO_EVAL = DataConfig(input_size=(3, 224, 224), resize_size=256, crop_pct=0.875, interpolation="bicubic")

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
# VideoMAE V2 evaluation (dataset/datasets.py VideoClsDataset, mode 'validation'): Resize(short_side_size,
# bilinear) + CenterCrop(224) + ImageNet mean/std; scripts/finetune/vit_b_k400_ft.sh: --short_side_size 224.
VIDEOMAE_V2_EVAL = DataConfig(
    input_size=(3, 224, 224), resize_size=224, crop_pct=1.0, interpolation="bilinear"
)
# 16 frames, 4 native frames apart (--num_frames 16 --sampling_rate 4: pretraining and fine-tuning scripts),
# centred on the sampled frame (it is frame 8, the first of the 5th tubelet)
VIDEOMAE_V2_CLIP = ClipSampling(num_frames=16, frame_stride=4)
VIDEOMAE_V2_PREPROCESSING_SOURCE = (
    "github.com/OpenGVLab/VideoMAEv2: 16 frames every 4th native frame (scripts/pretrain/vit_b_hybrid_pt.sh "
    "and scripts/finetune/vit_b_k400_ft.sh: --num_frames 16 --sampling_rate 4); frames resized shorter side "
    "224 (bilinear), centre crop 224, ImageNet mean/std (dataset/datasets.py VideoClsDataset 'validation'); "
    "feature = fc_norm(mean of tokens) (models/modeling_finetune.py VisionTransformer.forward_features, "
    "use_mean_pooling, as extract_tad_feature.py takes it); window centred on the sampled frame"
)
# Endo-FM evaluation (eval_finetune.py with models/configs/Kinetics/TimeSformer_divST_8x32_224.yaml and the
# utils/defaults.py it overrides): 8 frames, SAMPLING_RATE 32 at TARGET_FPS 30, TEST_CROP_SIZE 224 (short side
# 224, centre crop of the 3 spatial crops), bilinear, mean 0.45 / std 0.225 per channel.
ENDO_FM_EVAL = DataConfig(
    input_size=(3, 224, 224),
    resize_size=224,
    crop_pct=1.0,
    interpolation="bilinear",
    mean=(0.45, 0.45, 0.45),
    std=(0.225, 0.225, 0.225),
)
# the decoder cuts 8 * 32 / 30 s (datasets/decoder.py: clip_size = sampling_rate * num_frames / target_fps
# * fps) and takes 8 frames evenly over it (temporal_sampling: linspace), i.e. 8 * 32 / 30 / 7 s apart
ENDO_FM_CLIP = ClipSampling(num_frames=8, stride_seconds=8 * 32 / 30 / 7)
ENDO_FM_PREPROCESSING_SOURCE = (
    "github.com/med-air/Endo-FM: eval_finetune.py with "
    "models/configs/Kinetics/TimeSformer_divST_8x32_224.yaml "
    "(NUM_FRAMES 8, SAMPLING_RATE 32, TEST_CROP_SIZE 224) and utils/defaults.py (TARGET_FPS 30, MEAN 0.45, "
    "STD 0.225): 8 frames evenly over 8*32/30 s (datasets/decoder.py get_start_end_idx + temporal_sampling), "
    "shorter side 224 (bilinear, datasets/transform.py random_short_side_scale_jitter) and the centre of "
    "uniform_crop 224; feature = CLS after the final norm (models/timesformer.py "
    "VisionTransformer.forward_features, x[:, 0]); window centred on the sampled frame"
)
CLIP_CONVERTERS = ("videomae", "timesformer", "vjepa2")  # one feature per window of frames (clip_models.py)
CONVERTERS = ("timm", "vit", "convnext", "dinov3", "pixels", *CLIP_CONVERTERS)
# what each converter's feature vector is (cards, docs); "timm", "vit" and "dinov3" ViTs give the CLS token
FEATURES = {
    "convnext": "globally pooled features",
    "videomae": "mean of the patch tokens after `fc_norm`",
    "timesformer": "CLS token after the final norm",
    "vjepa2": "mean of all tokens after the final norm",
    "pixels": "the frame downsampled to 8x8x3",
}


@dataclass(frozen=True)
class ModelEntry:
    """One named encoder. `converter`: "timm" (timm-format folder), "vit", "convnext" or "dinov3" (raw
    checkpoint), "pixels" (no weights: `plstitch_eval.hub.pixels`), "videomae", "timesformer" or "vjepa2"
    (raw clip checkpoint)."""

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
        return FEATURES.get(self.converter, "CLS token after the final norm")

    @property
    def has_weights(self) -> bool:
        """False for encoders built in code (converter "pixels"): nothing to download or cache."""
        return self.converter != "pixels"

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


for _dataset in ("lemon", "breakfast", "gtea"):
    register(
        ModelEntry(
            name=f"pl-stitch-{_dataset}",
            architecture="vit_base_patch16",
            feature_dim=768,
            data_config=PL_STITCH_EVAL,
            converter="vit",
            expected=VIT_B16,
            repo_id="visurg/PL-Stitch",
            filename=f"pl_{_dataset}.pth",
            license="MIT",
            license_source="github.com/visurg-ai/PL-Stitch LICENSE (MIT, Copyright (c) 2025 Chengan Che)",
            preprocessing_source=PL_STITCH_PREPROCESSING_SOURCE,
            citation=PL_STITCH_CITATION,
            description=f"PL-Stitch ViT-B/16 teacher pretrained on {_dataset.capitalize()}.",
        )
    )

register(
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
    )
)
register(
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
    )
)
register(
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
    )
)
register(
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
    )
)
register(
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
    )
)
register(
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
    )
)
register(
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
    )
)
register(
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
    )
)
register(
    ModelEntry(
        name="videomaev2-vitb16",
        architecture="videomaev2_vitb16_t2",
        feature_dim=768,
        data_config=VIDEOMAE_V2_EVAL,
        converter="videomae",
        clip=VIDEOMAE_V2_CLIP,
        expected={"embed_dim": 768, "depth": 12, "num_heads": 12, "patch_size": 16, "tubelet_size": 2},
        repo_id="OpenGVLab/VideoMAEv2-Base",
        filename="model.safetensors",
        path_env="PLSTITCH_VIDEOMAEV2_CHECKPOINT",
        license="CC-BY-NC-4.0",
        license_source="huggingface.co/OpenGVLab/VideoMAEv2-Base model card (license: cc-by-nc-4.0); the "
        "code, github.com/OpenGVLab/VideoMAEv2, is MIT",
        preprocessing_source=VIDEOMAE_V2_PREPROCESSING_SOURCE,
        citation="Wang et al. VideoMAE V2: Scaling Video Masked Autoencoders with Dual Masking. CVPR 2023.",
        description="VideoMAE V2 ViT-B/16, tubelet 2 (UnlabeledHybrid-1M, self-supervised): one feature per "
        "16-frame window, mean-pooled tokens + fc_norm. $PLSTITCH_VIDEOMAEV2_CHECKPOINT loads your own "
        "checkpoint in an upstream layout instead.",
    )
)
register(
    ModelEntry(
        name="endo-fm",
        architecture="timesformer_vitb16_divst",
        feature_dim=768,
        data_config=ENDO_FM_EVAL,
        converter="timesformer",
        clip=ENDO_FM_CLIP,
        expected={"embed_dim": 768, "depth": 12, "num_heads": 12, "patch_size": 16, "num_frames": 8},
        path_env="PLSTITCH_ENDOFM_CHECKPOINT",
        license="Apache-2.0",
        license_source="github.com/med-air/Endo-FM README (License: Apache License 2.0) and LICENSE",
        preprocessing_source=ENDO_FM_PREPROCESSING_SOURCE,
        citation="Wang et al. Foundation Model for Endoscopy Video Analysis via Large-scale Self-supervised "
        "Pre-train. MICCAI 2023.",
        description="Endo-FM TimeSformer ViT-B/16 (divided space-time, 8 frames; endoscopy videos): CLS "
        "feature of an 8-frame window. Weights: the Google Drive link of the Endo-FM README "
        "(endo_fm.pth); set $PLSTITCH_ENDOFM_CHECKPOINT or pass its path.",
    )
)
# ------------------------------------------------------------------------------------ baselines of 2026

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
for _size, (_timm, _dim, _depth, _heads) in DINOV3_SIZES.items():
    register(
        ModelEntry(
            name=f"dinov3-vit{_size}16",
            architecture=f"vit_{_timm}_patch16_dinov3",
            feature_dim=_dim,
            data_config=DINO_EVAL,
            converter="timm",
            repo_id=f"timm/vit_{_timm}_patch16_dinov3.lvd1689m",
            license="DINOv3 License",
            license_source=DINOV3_LICENSE_SOURCE,
            preprocessing_source=DINOV3_PREPROCESSING_SOURCE
            + "; timm's port computes its RoPE periods in float32 (Meta's files store them bf16-rounded)",
            citation=DINOV3_CITATION,
            description=f"DINOv3 ViT-{_size.upper()}/16 distilled on LVD-1689M (timm's port, 4 registers): "
            "CLS feature at 224 px.",
        )
    )
    register(
        ModelEntry(
            name=f"dinov3-vit{_size}16-facebook",
            architecture=f"vit_{_timm}_patch16_dinov3",
            feature_dim=_dim,
            data_config=DINO_EVAL,
            converter="dinov3",
            expected={"embed_dim": _dim, "depth": _depth, "num_heads": _heads, "patch_size": (16, 16)},
            repo_id=f"facebook/dinov3-vit{_size}16-pretrain-lvd1689m",
            filename="model.safetensors",
            gated=True,
            license="DINOv3 License",
            license_source=DINOV3_LICENSE_SOURCE,
            preprocessing_source=DINOV3_PREPROCESSING_SOURCE,
            citation=DINOV3_CITATION,
            description=f"DINOv3 ViT-{_size.upper()}/16 (LVD-1689M) from Meta's gated Hub repo (transformers "
            "layout, converted to timm's Eva with every tensor): CLS feature at 224 px.",
        )
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
for _version, _title, _size, _patch, _px, _dim, _depth in SURGENET_MODELS:
    _pinned: dict[str, Any] = {"embed_dim": _dim, "depth": _depth, "patch_size": (_patch, _patch)}
    if _version != "dinov3":  # learned position tables: the pretraining size is in the tensors
        _pinned["img_size"] = (_px, _px)
    register(
        ModelEntry(
            name=f"surgenet-{_version}-vit{_size}{_patch}",
            architecture=f"vit_{DINOV3_SIZES[_size][0]}_patch{_patch}"
            + ("_dinov3" if _version == "dinov3" else ""),
            feature_dim=_dim,
            data_config=DataConfig.for_size(_px, interpolation="bicubic"),
            converter="dinov3" if _version == "dinov3" else "vit",
            expected=_pinned,
            # SurgeNetDINO's DINOv3 configs: norm_layer "layernorm" (eps 1e-6 in dinov3's norm_layer_dict)
            model_args={"norm_eps": 1e-6} if _version == "dinov3" else {},
            repo_id=SURGENET_REPO,
            filename=f"{_title}_ViT{_size}{_patch}_size{_px}_SurgeNetXL.pth",
            license="CC-BY-NC-SA-4.0",
            license_source=SURGENET_LICENSE_SOURCE,
            preprocessing_source=SURGENET_PREPROCESSING_SOURCE,
            citation=SURGENET_CITATION,
            description=f"SurgeNetDINO {_title} ViT-{_size.upper()}/{_patch} pretrained on SurgeNetXL "
            f"(surgical video frames) at {_px} px: CLS feature.",
        )
    )

# V-JEPA 2 frozen evaluation (evals/video_classification_frozen/utils.py VideoTransform, eval branch):
# shorter side int(256 * 256 / 224) = 292 (bilinear), centre crop 256, ImageNet mean/std
VJEPA2_EVAL = DataConfig.for_size(256, crop_pct=256 / 292, interpolation="bilinear")
# 16 frames, 4 native frames apart (configs/eval/vitl/coin.yaml and k400.yaml: frames_per_clip 16,
# frame_step 4), centred on the sampled frame (frame 8, the first of tubelet slot 4); the checkpoint was
# pretrained on 64-frame clips, which RoPE (no position table) lets it take at any length
VJEPA2_CLIP = ClipSampling(num_frames=16, frame_stride=4)
VJEPA2_PREPROCESSING_SOURCE = (
    "github.com/facebookresearch/vjepa2: evals/video_classification_frozen/utils.py (eval: shorter side "
    "int(256*256/224) = 292 bilinear, centre crop 256, ImageNet mean/std); configs/eval/vitl/coin.yaml "
    "(frames_per_clip 16, frame_step 4, resolution 256); feature = mean of all encoder tokens after the "
    "final norm (the input of the attentive probe the authors train; docs/baselines.md); window centred on "
    "the sampled frame"
)
register(
    ModelEntry(
        name="vjepa2-vitl16",
        architecture="vjepa2_vitl16_t2",
        feature_dim=1024,
        data_config=VJEPA2_EVAL,
        converter="vjepa2",
        clip=VJEPA2_CLIP,
        expected={"embed_dim": 1024, "depth": 24, "num_heads": 16, "patch_size": 16, "tubelet_size": 2},
        repo_id="facebook/vjepa2-vitl-fpc64-256",
        filename="model.safetensors",
        path_env="PLSTITCH_VJEPA2_CHECKPOINT",
        license="Apache-2.0",
        license_source="huggingface.co/facebook/vjepa2-vitl-fpc64-256 model card (license: apache-2.0); the "
        "code, github.com/facebookresearch/vjepa2, is MIT (README 'License')",
        preprocessing_source=VJEPA2_PREPROCESSING_SOURCE,
        citation="Assran et al. V-JEPA 2: Self-Supervised Video Models Enable Understanding, Prediction and "
        "Planning. arXiv:2506.09985, 2025.",
        description="V-JEPA 2 ViT-L/16, tubelet 2, 3-D RoPE (VideoMix22M, pretrained on 64-frame clips at "
        "256 px): one feature per 16-frame window, the mean of all tokens. $PLSTITCH_VJEPA2_CHECKPOINT loads "
        "your own checkpoint in the transformers layout instead.",
    )
)
register(
    ModelEntry(
        name="videomaev2-vitl16",
        architecture="videomaev2_vitl16_t2",
        feature_dim=1024,
        data_config=VIDEOMAE_V2_EVAL,
        converter="videomae",
        clip=VIDEOMAE_V2_CLIP,
        expected={"embed_dim": 1024, "depth": 24, "num_heads": 16, "patch_size": 16, "tubelet_size": 2},
        repo_id="OpenGVLab/VideoMAEv2-Large",
        filename="model.safetensors",
        path_env="PLSTITCH_VIDEOMAEV2_L_CHECKPOINT",
        license="CC-BY-NC-4.0",
        license_source="huggingface.co/OpenGVLab/VideoMAEv2-Large model card (license: cc-by-nc-4.0), as for "
        "VideoMAEv2-Base; the code, github.com/OpenGVLab/VideoMAEv2, is MIT",
        preprocessing_source=VIDEOMAE_V2_PREPROCESSING_SOURCE.replace("vit_b_", "vit_l_"),
        citation="Wang et al. VideoMAE V2: Scaling Video Masked Autoencoders with Dual Masking. CVPR 2023.",
        description="VideoMAE V2 ViT-L/16, tubelet 2 (UnlabeledHybrid-1M, self-supervised): one feature per "
        "16-frame window, mean-pooled tokens + fc_norm. $PLSTITCH_VIDEOMAEV2_L_CHECKPOINT loads your own "
        "checkpoint in an upstream layout instead.",
    )
)

register(
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
    )
)
register(
    ModelEntry(
        name="raw-pixels",
        architecture="pixels_8x8x3",
        feature_dim=math.prod(PIXELS_DATA_CONFIG.input_size),  # 192
        converter="pixels",
        data_config=PIXELS_DATA_CONFIG,
        license="n/a (no weights)",
        license_source="n/a",
        preprocessing_source="plstitch_eval/hub/pixels.py",
        citation="n/a (reference row: no model)",
        description="reference row: each frame downsampled to 8x8x3, no learning",
    )
)
