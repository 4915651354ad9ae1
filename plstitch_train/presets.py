"""Named presets of the training configuration (`paper-vitb16`, `paper-vitb16-cooking`, `ablation-vits16`,
`tiny-cpu`); `TrainConfig` itself and its sections live in `plstitch_train.config` (re-exported here).

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

__all__ = ["DECODER_CHOICES", "FRAME_STORES", "OBJECTIVES", "PRESETS", "TrainConfig", "get_preset"]


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


PRESETS = {
    "paper-vitb16": _paper_vitb16,
    "paper-vitb16-cooking": _paper_vitb16_cooking,
    "ablation-vits16": _ablation_vits16,
    "tiny-cpu": _tiny_cpu,
}


def get_preset(name: str) -> TrainConfig:
    """A fresh `TrainConfig` for preset `name`."""
    if name not in PRESETS:
        raise ConfigError(f"Unknown preset {name!r}; choose one of {', '.join(PRESETS)}.")
    return PRESETS[name]()
