"""Named presets of the training configuration (`paper-vitb16`, `paper-vitb16-cooking`, `ablation-vits16`,
`tiny-cpu`, `tiny-cpu-synthetic`); `TrainConfig` itself and its sections live in `plstitch_train.config`
(re-exported here).

Every number of REFERENCE section 1 lives in the sections' defaults (the `paper-vitb16` preset) or here,
so one change moves it everywhere; the CLI only overrides. The paper presets take the paper's numbers and,
where the paper is silent, the authors' script (`scripts/pretrain_lmdb.sh` and the defaults of
`main_pl_lmdb.py`); docs/faithfulness.md lists each choice.
"""

from __future__ import annotations

from plstitch_eval.errors import ConfigError
from plstitch_train.config import (
    DECODER_CHOICES,
    FRAME_STORES,
    OBJECTIVES,
    FramesConfig,
    LossConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    SamplingConfig,
    TrainConfig,
)

__all__ = [
    "DECODER_CHOICES",
    "FRAME_STORES",
    "OBJECTIVES",
    "PRESETS",
    "SHIPPED_MIM_INIT",
    "SYNTHETIC_EPOCHS",
    "SYNTHETIC_TRAINING",
    "TrainConfig",
    "get_preset",
]

# The synthetic procedure lasts 40-90 s where a surgery lasts 30-90 min, so its time scale is ~40x shorter.
# Clip steps are scaled with it: 4-frame clips at 2 fps with 10-40 frames (5-20 s) between frames span 15-60 s
# of a video, enough for its irreversible changes to show; with the paper's 1-20 frame steps L_vid stays at
# chance within a CPU budget (measured, docs/reproduce.md). Higher lr, short warm-ups and a fast teacher fit
# runs of a few hundred steps (an epoch is every training frame once: ~130 steps of 16). Flat overrides of
# `tiny-cpu`, shared with `plstitch reproduce --preset synthetic*`.
SYNTHETIC_TRAINING = {
    "base_lr": 1.6e-2,
    "momentum_teacher": 0.99,
    "min_step": 10,
    "max_step": 40,
    "num_workers": 1,
    "frame_store": "raw",  # 1.6 k frames of 64 px: the uint8 cache is small and needs no JPEG decoding
    "warmup_epochs": 0.1,
    "jigsaw_start_epoch": 0.25,
    "jigsaw_ramp_epochs": 0.25,
}
SYNTHETIC_EPOCHS = 6
# The stand-in for ImageNet iBOT: the tiny ViT after MIM alone on the synthetic train split (model_cards/),
# what every synthetic reproduction run - and the `tiny-cpu-synthetic` preset - starts from.
SHIPPED_MIM_INIT = "ibot-tiny-synthetic"


def _paper_vitb16() -> TrainConfig:
    """Surgical setting (LEMON): 30 epochs, 3 warm-up, batch 240; the rest from the authors' script."""
    return TrainConfig()


def _paper_vitb16_cooking() -> TrainConfig:
    """Cooking setting (Breakfast, GTEA training sets): 100 epochs with 10 warm-up; otherwise identical."""
    return TrainConfig(optim=OptimConfig(epochs=100, warmup_epochs=10.0))


def _ablation_vits16() -> TrainConfig:
    """The paper's ablations: ViT-S/16 on LEMON with the surgical settings."""
    return TrainConfig(model=ModelConfig(arch="vit_small_patch16_224"))


def _tiny_cpu() -> TrainConfig:
    """A few-minute CPU run on small frames: tiny ViT, short clips, higher lr, a faster teacher."""
    return TrainConfig(
        frames=FramesConfig(fps=2.0, frame_size=64),
        sampling=SamplingConfig(
            clip_len=4, max_step=8, clips_per_video=(16, 32, 48), context_seconds=(0.5, 1.5)
        ),
        model=ModelConfig(
            arch="vit_tiny_patch16_224",
            model_args={"patch_size": 8, "embed_dim": 64, "depth": 4, "num_heads": 4},
            img_size=64,
            drop_path=0.0,
            ibot_out_dim=256,
            ibot_hidden_dim=128,
            ibot_bottleneck_dim=64,
            temporal_layers=2,
            temporal_heads=4,
            temporal_dropout=0.0,
            jigsaw_heads=4,
        ),
        loss=LossConfig(jigsaw_start_epoch=0.25, jigsaw_ramp_epochs=0.25, warmup_teacher_temp_epochs=0),
        optim=OptimConfig(
            epochs=1,  # an epoch is every training frame once: ~130 steps of 16 on the synthetic train split
            batch_size=16,
            base_lr=1.6e-2,  # x batch/256 = 1e-3 at batch 16
            min_lr=1e-5,
            warmup_epochs=0.1,
            momentum_teacher=0.99,
            freeze_last_layer_epochs=0,
        ),
        run=RunConfig(device="cpu", precision="fp32", num_workers=0, checkpoint_every=50, log_every=5),
    )


def _tiny_cpu_synthetic() -> TrainConfig:
    """A few-minute CPU run that learns: `tiny-cpu` with the synthetic reproduction's settings, 6 epochs of
    L_vid + jigsaw (+ MIM) from the shipped MIM initialisation, as the paper starts from ImageNet iBOT."""
    return _tiny_cpu().with_changes(**SYNTHETIC_TRAINING, epochs=SYNTHETIC_EPOCHS, init=SHIPPED_MIM_INIT)


PRESETS = {
    "paper-vitb16": _paper_vitb16,
    "paper-vitb16-cooking": _paper_vitb16_cooking,
    "ablation-vits16": _ablation_vits16,
    "tiny-cpu": _tiny_cpu,
    "tiny-cpu-synthetic": _tiny_cpu_synthetic,
}


def get_preset(name: str) -> TrainConfig:
    """A fresh `TrainConfig` for preset `name`."""
    if name not in PRESETS:
        raise ConfigError(f"Unknown preset {name!r}; choose one of {', '.join(PRESETS)}.")
    return PRESETS[name]()
