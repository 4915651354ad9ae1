"""Training settings: `TrainConfig` and its sections, one module each (presets: `plstitch_train.presets`).

Torch-free, so the CLI can list presets and objectives without importing torch.
"""

from plstitch_train.config.frames import DECODER_CHOICES, FRAME_STORES, FramesConfig
from plstitch_train.config.loss import OBJECTIVES, LossConfig
from plstitch_train.config.model import ModelConfig
from plstitch_train.config.optim import OptimConfig
from plstitch_train.config.run import RunConfig
from plstitch_train.config.sampling import SamplingConfig
from plstitch_train.config.train_config import (
    ADDED_SETTINGS,
    FIELD_SECTION,
    FLAT_FIELDS,
    PERMUTATION_SETTINGS,
    SECTIONS,
    TrainConfig,
    flat_settings,
    setting_name,
)

__all__ = [
    "ADDED_SETTINGS",
    "DECODER_CHOICES",
    "FIELD_SECTION",
    "FLAT_FIELDS",
    "FRAME_STORES",
    "OBJECTIVES",
    "PERMUTATION_SETTINGS",
    "SECTIONS",
    "FramesConfig",
    "LossConfig",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "SamplingConfig",
    "TrainConfig",
    "flat_settings",
    "setting_name",
]
