"""The `model` section of a TrainConfig: the ViT backbone, its start weights and the heads' sizes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from plstitch_train.config.section import Section, require

# the permutation objective's classifier: "temporal" = the temporal head's trunk, then a Linear over the
# flattened frames; "linear" = one Linear over the concatenated frame embeddings (runs before the setting)
PERMUTATION_HEADS = ("temporal", "linear")


@dataclass
class ModelConfig(Section):
    """Backbone (`arch` + `model_args` at `img_size`), iBOT, temporal and jigsaw heads, MIM mask ratio."""

    NAME = "model"

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
    permutation_head: str = "temporal"  # objective "permutation" only: one of PERMUTATION_HEADS

    def __post_init__(self) -> None:
        require(
            self.temporal_dim >= 0 and self.temporal_ff >= 0,
            f"temporal_dim and temporal_ff must be >= 0, 0 meaning auto (got {self.temporal_dim}, "
            f"{self.temporal_ff}).",
        )
        require(self.temporal_layers >= 1, f"temporal_layers must be >= 1 (got {self.temporal_layers}).")
        require(self.temporal_heads >= 1, f"temporal_heads must be >= 1 (got {self.temporal_heads}).")
        require(
            self.jigsaw_heads >= 0, f"jigsaw_heads must be >= 0, 0 meaning auto (got {self.jigsaw_heads})."
        )
        require(
            self.permutation_head in PERMUTATION_HEADS,
            f"permutation_head {self.permutation_head!r} unknown; use one of {', '.join(PERMUTATION_HEADS)}.",
        )
        require(0 <= self.mask_ratio < 1, f"mask_ratio must be in [0, 1) (got {self.mask_ratio}).")
