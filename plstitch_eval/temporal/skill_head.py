"""A small temporal head that regresses one skill score per video from its frame features (and their change).

Why: skill shows in how the scene moves, which a mean of frame features averages away. Each frame's input is
its standardised features beside their difference from the previous frame (0 at the first frame); a 1x1
conv maps them to `channels`, `layers` dilated residual layers (MS-TCN's, dilation 2^i, kernel 3) mix them
over time, and the frames are pooled - attention (a softmax over the video's frames of a 1x1 conv's score)
or the mean - into one number. Trained on the training videos' standardised scores with the mean squared
error, Adam, all training videos in one padded batch per step, a fixed number of epochs (no validation
videos: a skill fold has a dozen videos to train on), seeded; the prediction is unstandardised.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.temporal.mstcn import DilatedResidualLayer
from plstitch_eval.utils.device import torch_threads

POOLINGS = ("attention", "mean")
Projection = tuple[np.ndarray, np.ndarray, np.ndarray]  # feature mean [D], std [D], principal axes [D, k]


@dataclass(frozen=True)
class SkillHeadConfig:
    """The temporal skill head's settings, checked on construction."""

    layers: int = 2
    channels: int = 8
    dropout: float = 0.1
    lr: float = 3e-3
    weight_decay: float = 1e-3
    epochs: int = 300
    pooling: str = field(default="mean", metadata={"choices": POOLINGS})
    components: int = 4  # principal components of the standardised features fed to the convs
    differences: bool = True  # the frame-to-frame change of the features beside them
    seed: int = 0
    num_threads: int | None = 1  # fixed: the thread count changes the float rounding

    def __post_init__(self) -> None:
        for name in ("layers", "channels", "epochs", "components"):
            if getattr(self, name) < 1:
                raise ConfigError(f"skill head {name} must be >= 1 (got {getattr(self, name)}).")
        if not 0 <= self.dropout < 1 or self.lr <= 0 or self.weight_decay < 0:
            raise ConfigError(
                f"skill head dropout must be in [0, 1), lr > 0 and weight_decay >= 0 (got dropout="
                f"{self.dropout}, lr={self.lr}, weight_decay={self.weight_decay})."
            )
        if self.pooling not in POOLINGS:
            raise ConfigError(f"skill head pooling must be attention or mean, got {self.pooling!r}.")


class SkillTCN(nn.Module):
    """``forward(x [B, D_in, T], mask [B, 1, T]) -> [B]``: dilated temporal convs, pooled over real frames."""

    def __init__(self, in_dim: int, config: SkillHeadConfig) -> None:
        super().__init__()
        self.pooling = config.pooling
        self.conv_in = nn.Conv1d(in_dim, config.channels, 1)
        self.layers = nn.ModuleList(
            DilatedResidualLayer(2**i, config.channels, config.dropout) for i in range(config.layers)
        )
        self.attend = nn.Conv1d(config.channels, 1, 1)
        self.out = nn.Linear(config.channels, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.conv_in(x) * mask
        for layer in self.layers:
            h = layer(h, mask)
        if self.pooling == "attention":
            weights = torch.softmax(self.attend(h).masked_fill(mask == 0, float("-inf")), dim=2)
        else:
            weights = mask / mask.sum(2, keepdim=True)
        return self.out((h * weights).sum(2)).squeeze(1)


def frame_inputs(features: np.ndarray, projection: Projection, differences: bool) -> np.ndarray:
    """[T, k] or [T, 2k + 1] float32: the standardised features' first k principal components, and with
    `differences` how far each moved since the previous frame and the size of the whole frame's change
    (the root mean square of the standardised features' difference; 0 at the first frame)."""
    mean, std, axes = projection
    z = (np.asarray(features, np.float64) - mean) / std
    x = z @ axes
    if differences:
        change = np.diff(z, axis=0, prepend=z[:1])
        size = np.sqrt((change**2).mean(1, keepdims=True))
        x = np.concatenate([x, np.abs(np.diff(x, axis=0, prepend=x[:1])), size], axis=1)
    return x.astype(np.float32)


def fit_projection(frames: np.ndarray, components: int) -> Projection:
    """Per-dimension mean and std of training frames [N, D], and their first `components` principal axes
    [D, k] (k at most D and N), scaled to unit variance: the head's few inputs (a dozen videos train it)."""
    mean, std = frames.mean(0), frames.std(0)
    std[std == 0] = 1.0
    z = (frames - mean) / std
    _, singular, vt = np.linalg.svd(z, full_matrices=False)
    k = min(components, len(singular))
    scale = singular[:k] / np.sqrt(len(frames))
    return mean, std, vt[:k].T / np.where(scale > 0, scale, 1.0)


def _batch(videos: Sequence[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs [B, D, T_max] zero-padded and mask [B, 1, T_max] (1 = a real frame)."""
    longest = max(len(v) for v in videos)
    x = torch.zeros(len(videos), videos[0].shape[1], longest)
    mask = torch.zeros(len(videos), 1, longest)
    for i, v in enumerate(videos):
        x[i, :, : len(v)], mask[i, :, : len(v)] = torch.from_numpy(v).T, 1.0
    return x, mask


@dataclass
class SkillHeadFit:
    """A fitted head with the standardisation of its inputs and targets; `predict` gives scores."""

    model: SkillTCN
    config: SkillHeadConfig
    projection: Projection
    score_stats: tuple[float, float]
    train_losses: list[float]

    def predict(self, videos: Sequence[np.ndarray]) -> np.ndarray:
        """One score (float64) per video of frame features [T, D]."""
        x, mask = _batch([frame_inputs(v, self.projection, self.config.differences) for v in videos])
        self.model.eval()
        with torch.inference_mode(), torch_threads(self.config.num_threads):
            z = self.model(x, mask).double().numpy()
        return z * self.score_stats[1] + self.score_stats[0]


def fit_skill_head(
    videos: Sequence[np.ndarray], scores: Sequence[float], config: SkillHeadConfig | None = None
) -> SkillHeadFit:
    """Train the head on videos' frame features [T, D] and their scores; deterministic given the seed."""
    config = config or SkillHeadConfig()
    if len(videos) < 2 or len(videos) != len(scores):
        raise EvaluationError(
            f"The temporal skill head needs >= 2 scored training videos, got {len(videos)}."
        )
    projection = fit_projection(
        np.concatenate([np.asarray(v, np.float64) for v in videos]), config.components
    )
    y = np.asarray(scores, np.float64)
    y_mean, y_std = float(y.mean()), float(y.std()) or 1.0
    x, mask = _batch([frame_inputs(v, projection, config.differences) for v in videos])
    target = torch.from_numpy((y - y_mean) / y_std).float()
    losses = []
    with torch_threads(config.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = SkillTCN(x.shape[1], config)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        model.train()
        for _ in range(config.epochs):
            optimizer.zero_grad()
            loss = torch.mean((model(x, mask) - target) ** 2)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    if not np.isfinite(losses[-1]):
        raise EvaluationError(f"The temporal skill head's loss became {losses[-1]}; lower its lr.")
    return SkillHeadFit(model, config, projection, (y_mean, y_std), losses)
