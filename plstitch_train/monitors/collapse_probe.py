"""How collapsed an iBOT branch is: are images still told apart by the backbone, the head's bottleneck and
its outputs, and is the sharpened teacher still informative? (docs/reproduce.md, "What the collapse looks
like".) Functions of tensors; `probe_checkpoint` applies them to a run's `last.ckpt`.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from plstitch_train.config import TrainConfig
from plstitch_train.model import PLStitchModel
from plstitch_train.run.checkpoint import load_training_checkpoint

__all__ = ["collapse_measures", "mean_pairwise_cosine", "probe_checkpoint"]


def mean_pairwise_cosine(x: Tensor) -> float:
    """Mean cosine similarity over all ordered pairs of distinct rows of `x` [N, D] (N >= 2)."""
    unit = F.normalize(x.float(), dim=-1)
    sims = unit @ unit.T
    n = len(x)
    return float((sims.sum() - sims.diagonal().sum()) / (n * (n - 1)))


def collapse_measures(
    cls_tokens: Tensor, bottleneck: Tensor, logits: Tensor, centre: Tensor | None, temperature: float
) -> dict[str, float]:
    """Per-image CLS tokens [N, D], bottleneck vectors [N, d], head outputs [N, K] -> the collapse measures.

    `logit_spread` is the std over the K outputs, averaged over images: below the teacher `temperature` the
    softmax of the centred outputs is close to uniform (`teacher_entropy` near `uniform_entropy` = log K).
    """
    centred = logits.float() - (0 if centre is None else centre.float())
    probs = F.softmax(centred / temperature, dim=-1)
    entropy = -(probs * probs.clamp_min(1e-30).log()).sum(-1).mean()
    return {
        "cls_pairwise_cosine": mean_pairwise_cosine(cls_tokens),
        "bottleneck_pairwise_cosine": mean_pairwise_cosine(bottleneck),
        "logit_spread": float(logits.float().std(dim=1).mean()),
        "teacher_entropy": float(entropy),
        "uniform_entropy": math.log(logits.shape[1]),
    }


@torch.no_grad()
def probe_checkpoint(checkpoint: str | Path, images: Tensor, branch: str = "teacher") -> dict[str, float]:
    """The measures of `branch` (teacher or student) of a training run's checkpoint on normalised `images`
    [N, 3, S, S] at the run's last teacher CLS temperature."""
    saved = load_training_checkpoint(checkpoint)
    model = PLStitchModel(TrainConfig.from_dict(saved["config"]))
    model.load_state_dict(saved["model"])
    model.eval()
    part = model.teacher if branch == "teacher" else model.student
    tokens = part["backbone"](images)
    head = part["ibot_head"]
    bottleneck = F.normalize(head.mlp(tokens[:, 0]), dim=-1)
    logits = head.last_layer(bottleneck)  # the head's CLS output, from the bottleneck already computed
    temperature = model.ibot_loss.temperatures(10**9)[0]
    return collapse_measures(tokens[:, 0], bottleneck, logits, model.ibot_loss.center, temperature)
