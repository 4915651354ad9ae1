"""Training settings: `TrainConfig` and its sections, one module each (presets: `plstitch_train.presets`).

Torch-free (tests/train/config/test_torch_free.py), so the CLI can list presets and objectives without
importing torch; also the home of the loss-branch table (`branches.py`) and the permutation class limits.
"""

from plstitch_train.config.branches import BRANCH_NAMES, BRANCHES, LOSS_KEYS, Branch, branch, branch_weights
from plstitch_train.config.frames import DECODER_CHOICES, FRAME_STORES, FramesConfig
from plstitch_train.config.loss import CENTERINGS, OBJECTIVES, LossConfig, objective_choices
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
    "BRANCHES",
    "BRANCH_NAMES",
    "CENTERINGS",
    "LOSS_KEYS",
    "DECODER_CHOICES",
    "FIELD_SECTION",
    "FLAT_FIELDS",
    "FRAME_STORES",
    "OBJECTIVES",
    "PERMUTATION_SETTINGS",
    "SECTIONS",
    "Branch",
    "FramesConfig",
    "LossConfig",
    "ModelConfig",
    "OptimConfig",
    "RunConfig",
    "SamplingConfig",
    "TrainConfig",
    "branch",
    "branch_weights",
    "flat_settings",
    "objective_choices",
    "setting_name",
]
