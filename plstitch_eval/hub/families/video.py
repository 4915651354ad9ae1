"""Registry entries of clip encoders (one feature per window of frames): VideoMAE V2, Endo-FM, V-JEPA 2.

Each entry is registered where it is defined, at its place in `plstitch models` (`listing`). Each carries the
window of frames it sees around a sampled frame (`ModelEntry.clip`) with the sources of that window.
"""

from __future__ import annotations

import plstitch_eval.hub.converters  # noqa: F401  (registers the converter tags these entries name)
from plstitch_eval.data.video import ClipSampling
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.model_registry import BASELINES_2026, PAPER_BASELINES, register
from plstitch_eval.preprocess import DataConfig

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
VIDEOMAE_V2_SIZES = {  # Hub repo suffix, embed_dim, depth, heads, variable naming your own checkpoint
    "b": ("Base", 768, 12, 12, "PLSTITCH_VIDEOMAEV2_CHECKPOINT"),
    "l": ("Large", 1024, 24, 16, "PLSTITCH_VIDEOMAEV2_L_CHECKPOINT"),
}


def videomae_v2(size: str) -> ModelEntry:
    """The VideoMAE V2 ViT of `size` ("b", "l"; `VIDEOMAE_V2_SIZES`), tubelet 2, from OpenGVLab's Hub repo."""
    repo, dim, depth, heads, env = VIDEOMAE_V2_SIZES[size]
    # the Large card was read as stating what the Base card does
    as_for_base = ", as for VideoMAEv2-Base" if size != "b" else ""
    return ModelEntry(
        name=f"videomaev2-vit{size}16",
        architecture=f"videomaev2_vit{size}16_t2",
        feature_dim=dim,
        data_config=VIDEOMAE_V2_EVAL,
        converter="videomae",
        clip=VIDEOMAE_V2_CLIP,
        expected={"embed_dim": dim, "depth": depth, "num_heads": heads, "patch_size": 16, "tubelet_size": 2},
        repo_id=f"OpenGVLab/VideoMAEv2-{repo}",
        filename="model.safetensors",
        path_env=env,
        license="CC-BY-NC-4.0",
        license_source=f"huggingface.co/OpenGVLab/VideoMAEv2-{repo} model card (license: cc-by-nc-4.0)"
        f"{as_for_base}; the code, github.com/OpenGVLab/VideoMAEv2, is MIT",
        preprocessing_source=VIDEOMAE_V2_PREPROCESSING_SOURCE.replace("vit_b_", f"vit_{size}_"),
        citation="Wang et al. VideoMAE V2: Scaling Video Masked Autoencoders with Dual Masking. CVPR 2023.",
        description=f"VideoMAE V2 ViT-{size.upper()}/16, tubelet 2 (UnlabeledHybrid-1M, self-supervised): "
        f"one feature per 16-frame window, mean-pooled tokens + fc_norm. ${env} loads your own checkpoint in "
        "an upstream layout instead.",
    )


VIDEOMAEV2_VITB16 = register(videomae_v2("b"), listing=PAPER_BASELINES + 8)
VIDEOMAEV2_VITL16 = register(videomae_v2("l"), listing=BASELINES_2026 + 15)
ENDO_FM = register(
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
    ),
    listing=PAPER_BASELINES + 9,
)
VJEPA2_VITL16 = register(
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
    ),
    listing=BASELINES_2026 + 14,
)
