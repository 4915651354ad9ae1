"""What an L_vid objective is: the head it needs on the frame features, the clip it shows, the loss it takes.

Why: `PLStitchModel` asks the objective named by `config.loss.objective` for all three (losses/registry.py),
so adding an objective never edits the model. The default head: PL-Stitch's temporal head (frame scores).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from torch import Tensor, nn

from plstitch_train.config import TrainConfig
from plstitch_train.config.loss import ObjectiveFacts
from plstitch_train.heads import TemporalHead, temporal_head_size

__all__ = ["Objective"]


class Objective(nn.Module, ABC):
    """One L_vid objective: `build_head` (a student module, stored as `head_name`), `prepare`, `forward`.

    Subclasses set `name` and register with `@register_objective`. Built once per model from its config;
    it holds no parameters (the head does, inside the student, so checkpoints keep their layout).
    """

    name: ClassVar[str] = ""
    head_name: ClassVar[str] = "temporal_head"  # the student module the head is stored as (checkpoint key)
    # the settings only this objective reads and its config check, torch-free (`config.loss.ObjectiveFacts`)
    facts: ClassVar[ObjectiveFacts] = ObjectiveFacts()

    def __init__(self, config: TrainConfig) -> None:
        super().__init__()
        self.config = config

    def build_head(self, dim: int) -> nn.Module:
        """The head over the frame features [B, k, D]: by default the temporal head, one score per frame."""
        model = self.config.model
        hidden, ff = temporal_head_size(model, dim)
        return TemporalHead(
            dim, hidden, model.temporal_layers, model.temporal_heads, ff, model.temporal_dropout
        )

    def prepare(self, clip: Tensor) -> tuple[Tensor, Tensor | None]:
        """(the clip [B, k, 3, H, W] the backbone sees, the target `forward` needs): by default the clip in
        true order and no target."""
        return clip, None

    @abstractmethod
    def forward(self, head_output: Tensor, target: Tensor | None) -> Tensor:
        """The scalar loss of the head's output on the prepared clip (`target` from `prepare`)."""
