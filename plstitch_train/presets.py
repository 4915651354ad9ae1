"""Training configuration (`TrainConfig`) and named presets (`paper-vitb16`, `paper-vitb16-cooking`,
`ablation-vits16`, `tiny-cpu`).

Every number of REFERENCE section 1 lives here, so one change moves it everywhere; the CLI only overrides.
The paper presets take the paper's numbers and, where the paper is silent, the authors' script
(`scripts/pretrain_lmdb.sh` and the defaults of `main_pl_lmdb.py`); docs/faithfulness.md lists each choice.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from plstitch_eval.errors import ConfigError

DECODER_CHOICES = ("pyav", "torchcodec", "auto")  # as plstitch_eval.data.decoders (not imported: torch-free)

OBJECTIVES = ("pl", "pairwise", "permutation")
FRAME_STORES = ("lmdb", "raw")
_TUPLE_FIELDS = ("context_seconds", "clip_length_bounds", "clips_per_video")


@dataclass
class TrainConfig:
    """All settings of one pretraining run; JSON-serialisable through `to_dict` / `from_dict`.

    Every value is checked on construction (also by `replace`, `from_dict` and the presets), so a bad setting
    fails before any video is decoded; only the data source waits for `validate()`, as presets name none.
    """

    # --- data
    dataset: str | None = None  # dataset adapter name (with `root`, `split`)
    root: str | None = None
    split: str | None = "train"
    data: str | None = None  # a folder of videos / frame folders, or a frames LMDB (authors' layout)
    cache_dir: str | None = None  # decoded-frame cache; default <out>/frame_cache
    frame_store: str = "lmdb"  # decoded frames kept as: "lmdb" (JPEG, authors' layout) or "raw" (uint8 .npy)
    jpeg_quality: int = 90  # JPEG quality of the "lmdb" frame store
    fps: float = 1.0  # frames per second decoded for training
    frame_size: int = 256  # shorter side of cached frames (pixels)
    decoder: str = "pyav"  # video decoder of the frame caches: pyav | torchcodec | auto (on the CPU)
    reverse_time: bool = False
    # --- sampling
    clip_len: int = 8
    min_step: int = 1
    max_step: int = 20
    clip_length_bounds: tuple[int, int] = (240, 960)  # video lengths (frames) where the clip count steps up
    clips_per_video: tuple[int, int, int] = (60, 200, 300)  # < low, low..<high, >= high frames
    context_seconds: tuple[float, float] = (1.5, 2.5)
    # --- augmentation
    jigsaw_neighbour_colour: bool = (
        False  # True: jitter p=0.3 + grayscale p=0.2 on past/future (authors' code)
    )
    # --- model
    arch: str = "vit_base_patch16_224"
    model_args: dict[str, Any] = field(default_factory=dict)
    img_size: int = 224
    drop_path: float = 0.1
    init: str | None = None  # encoder spec for load_encoder (e.g. ibot-vitb16)
    ibot_out_dim: int = 8192
    ibot_hidden_dim: int = 2048
    ibot_bottleneck_dim: int = 256
    temporal_dim: int = 0  # 0 = auto: D/2 (authors' hidden_mul=0.5), resolved by model.temporal_head_size
    temporal_layers: int = 6
    temporal_heads: int = 8
    temporal_ff: int = 0  # 0 = auto: 4 x the temporal hidden width
    temporal_dropout: float = 0.1
    jigsaw_heads: int = 0  # 0 = authors' rule (12 when D=768 else 8)
    mask_ratio: float = 0.3
    # --- objective
    objective: str = "pl"
    lambda_vid: float = 1.0
    lambda_mim: float = 1.0
    lambda_jigsaw: float = 0.4
    jigsaw_start_epoch: float = 6.0
    jigsaw_ramp_epochs: float = 1.0
    student_temp: float = 0.1
    teacher_temp: float = 0.04
    warmup_teacher_temp: float = 0.04
    teacher_patch_temp: float = 0.07
    warmup_teacher_patch_temp: float = 0.04
    warmup_teacher_temp_epochs: int = 3
    # --- optimisation
    epochs: int = 30
    max_steps: int | None = None  # cap on optimizer steps; the schedules span min(epochs, max_steps)
    batch_size: int = 240  # global batch (all processes, all accumulation micro-steps)
    accum_steps: int = 1
    base_lr: float = 4e-4  # scaled by batch_size / 256
    min_lr: float = 1e-6
    warmup_epochs: float = 3.0
    weight_decay: float = 0.04
    weight_decay_end: float = 0.4
    momentum_teacher: float = 0.998
    clip_grad: float = 3.0
    clip_per_parameter: bool = True  # DINO/iBOT clip each parameter's gradient norm separately
    freeze_last_layer_epochs: int = 1
    # --- run
    seed: int = 0
    device: str = "auto"
    precision: str = "auto"
    num_workers: int = 4
    checkpoint_every: int = 500
    log_every: int = 10

    def __post_init__(self) -> None:
        self._check_values()

    def _check_values(self) -> None:
        """Reject values that would fail late or mean nothing (data source is checked by `validate`)."""
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"objective {self.objective!r} unknown; use one of {', '.join(OBJECTIVES)}.")
        if self.clip_len < 2:
            raise ConfigError(f"clip_len must be >= 2 (got {self.clip_len}).")
        if self.objective == "permutation":
            from plstitch_train.permutations import check_clip_len  # torch: only for this objective

            check_clip_len(self.clip_len)  # clip_len! classes: <= 8 frames
        if not 1 <= self.min_step <= self.max_step:
            raise ConfigError(f"need 1 <= min_step <= max_step (got {self.min_step}, {self.max_step}).")
        low, high = self.context_seconds
        if not 0 < low <= high:
            raise ConfigError(f"context_seconds must be 0 < MIN <= MAX (got {low}, {high}).")
        if min(self.lambda_vid, self.lambda_mim, self.lambda_jigsaw) < 0:
            raise ConfigError("lambda_vid, lambda_mim and lambda_jigsaw must be >= 0 (0 disables a branch).")
        if self.lambda_vid == self.lambda_mim == self.lambda_jigsaw == 0:
            raise ConfigError("All loss weights are 0: enable at least one of --lambda-vid/-mim/-jigsaw.")
        if self.batch_size < 1 or self.accum_steps < 1:
            raise ConfigError("batch_size and accum_steps must be >= 1.")
        if self.temporal_dim < 0 or self.temporal_ff < 0:
            raise ConfigError(
                f"temporal_dim and temporal_ff must be >= 0, 0 meaning auto (got {self.temporal_dim}, "
                f"{self.temporal_ff})."
            )
        if self.temporal_layers < 1 or self.temporal_heads < 1 or self.jigsaw_heads < 0:
            raise ConfigError("temporal_layers and temporal_heads must be >= 1, jigsaw_heads >= 0.")
        if self.frame_store not in FRAME_STORES or not 1 <= self.jpeg_quality <= 100:
            raise ConfigError(
                f"frame_store must be one of {', '.join(FRAME_STORES)} and jpeg_quality in 1..100 "
                f"(got {self.frame_store!r}, {self.jpeg_quality})."
            )
        if self.decoder not in DECODER_CHOICES:
            raise ConfigError(f"decoder must be one of {', '.join(DECODER_CHOICES)} (got {self.decoder!r}).")
        if self.fps <= 0 or self.epochs < 1:
            raise ConfigError(f"fps must be > 0 and epochs >= 1 (got {self.fps}, {self.epochs}).")
        if not 0 <= self.mask_ratio < 1:
            raise ConfigError(f"mask_ratio must be in [0, 1) (got {self.mask_ratio}).")
        if not 0 <= self.momentum_teacher <= 1:
            raise ConfigError(f"momentum_teacher must be in [0, 1] (got {self.momentum_teacher}).")
        if list(self.clip_length_bounds) != sorted(self.clip_length_bounds) or min(self.clips_per_video) < 1:
            raise ConfigError(
                "clip_length_bounds must be ascending and clips_per_video >= 1 "
                f"(got {self.clip_length_bounds}, {self.clips_per_video})."
            )
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"max_steps must be >= 1 or unset (got {self.max_steps}).")
        if self.checkpoint_every < 1 or self.log_every < 1 or self.num_workers < 0:
            raise ConfigError(
                "checkpoint_every and log_every must be >= 1, num_workers >= 0 "
                f"(got {self.checkpoint_every}, {self.log_every}, {self.num_workers})."
            )

    def validate(self) -> TrainConfig:
        """Ready to train: every value (as on construction) and exactly one data source; returns self."""
        self._check_values()
        if (self.dataset is None) == (self.data is None):
            raise ConfigError("Give exactly one data source: --data DIR, or --dataset NAME with --root.")
        return self

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON types (tuples become lists) - safe for torch.load(weights_only=True)."""
        out = dataclasses.asdict(self)
        for key in _TUPLE_FIELDS:
            out[key] = list(out[key])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of `to_dict`; unknown keys are an error naming the key."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"Unknown training settings {unknown}; known: {sorted(known)}.")
        data = dict(data)
        data.setdefault("frame_store", "raw")  # saved before the LMDB store existed: trained from raw frames
        for key in _TUPLE_FIELDS:
            if key in data:
                data[key] = tuple(data[key])
        return cls(**data)

    def replace(self, **changes: Any) -> TrainConfig:
        """A copy with `changes` applied (None values are ignored, so CLI defaults do not override)."""
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})


def _paper_vitb16() -> TrainConfig:
    """Surgical setting (LEMON): 30 epochs, 3 warm-up, batch 240; the rest from the authors' script."""
    return TrainConfig()


def _paper_vitb16_cooking() -> TrainConfig:
    """Cooking setting (Breakfast, GTEA training sets): 100 epochs with 10 warm-up; otherwise identical."""
    return TrainConfig(epochs=100, warmup_epochs=10.0)


def _ablation_vits16() -> TrainConfig:
    """The paper's ablations: ViT-S/16 on LEMON with the surgical settings."""
    return TrainConfig(arch="vit_small_patch16_224")


def _tiny_cpu() -> TrainConfig:
    """A few-minute CPU run on small frames: tiny ViT, short clips, higher lr, a faster teacher."""
    return TrainConfig(
        fps=2.0,
        frame_size=64,
        clip_len=4,
        max_step=8,
        clips_per_video=(16, 32, 48),
        context_seconds=(0.5, 1.5),
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
        jigsaw_start_epoch=0.25,
        jigsaw_ramp_epochs=0.25,
        epochs=1,  # an epoch is every training frame once: ~130 steps of 16 on the synthetic training split
        batch_size=16,
        base_lr=1.6e-2,  # x batch/256 = 1e-3 at batch 16
        min_lr=1e-5,
        warmup_epochs=0.1,
        warmup_teacher_temp_epochs=0,
        momentum_teacher=0.99,
        freeze_last_layer_epochs=0,
        device="cpu",
        precision="fp32",
        num_workers=0,
        checkpoint_every=50,
        log_every=5,
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
