"""Train an MS-TCN with one sigmoid output per label column (tools, triplets, CVS criteria); keep the epoch
best on validation videos by the task's own metric.

Why: the field's triplet and tool results use temporal models; this is MS-TCN's training (``fit.py``: Adam,
seeded video order, padded batches, the best validation epoch kept, ties the earliest) with its loss made
binary. ``multilabel_tcn_loss``, summed over stages: the binary cross-entropy with logits, averaged over the
annotated (frame, column) entries only (a target of -1 or NaN - a frame not annotated, or CVS's frame not
rated - and batch padding count nowhere; soft targets in [0, 1] are cross-entropy with soft labels), plus
``smooth_weight`` x MS-TCN's truncated MSE on the log-probabilities of each column's two outcomes
(``log sigmoid(z)``, ``log sigmoid(-z)``: a binary softmax over (0, z)), averaged over real consecutive
frame pairs x columns x 2. The network is ``MultiStageTCN(refine="sigmoid")``: stages 2..S refine the
previous stage's probabilities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from plstitch_eval.errors import EvaluationError
from plstitch_eval.temporal.epochs import Loop, fit_sigmoid_tcn
from plstitch_eval.temporal.fit import TemporalConfig, video_logits
from plstitch_eval.temporal.mstcn import MultiStageTCN, truncated_change

Video = tuple[np.ndarray, np.ndarray]  # (features [T, D], targets [T, K]: 0/1 or fractions; -1 or NaN = none)


@dataclass
class MultiLabelTCNResult:
    """The model at its best validation epoch (eval mode), that epoch (1-based), the per-epoch curves, and
    the CPU threads and device of the fit (they change the float rounding)."""

    model: MultiStageTCN
    best_epoch: int
    val_scores: list[float]  # the select metric after epoch 1, 2, ... (higher is better; NaN: undefined)
    train_losses: list[float]
    threads: int
    device: str

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Probabilities [T, K] (float64) of one video's features [T, D]: the last stage, eval mode."""
        return probabilities(self.model, features)


def probabilities(model: MultiStageTCN, features: np.ndarray) -> np.ndarray:
    """sigmoid of the last stage's outputs, [T, K] float64, of one whole video."""
    return torch.sigmoid(video_logits(model, features).double()).T.numpy()


def annotated(targets: torch.Tensor) -> torch.Tensor:
    """1.0 where a target is a label (finite and >= 0), 0.0 where it is -1 or NaN."""
    return (torch.isfinite(targets) & (targets >= 0)).to(torch.float32)


def multilabel_tcn_loss(
    stage_logits: torch.Tensor,
    targets: torch.Tensor,
    mask: torch.Tensor | None = None,
    smooth_weight: float = 0.15,
    tau: float = 4.0,
) -> torch.Tensor:
    """Sum over stages of the BCE over annotated entries + `smooth_weight` x the truncated MSE of the binary
    log-probabilities over real consecutive frames (module docstring).

    `stage_logits` [S, B, K, T], `targets` [B, K, T] (-1 or NaN: not annotated), `mask` [B, 1, T] (1 = a real
    frame, 0 = padding; None = all real). No annotated entry: the BCE term is 0.
    """
    columns, frames = stage_logits.shape[2], stage_logits.shape[3]
    if mask is None:
        mask = stage_logits.new_ones(stage_logits.shape[1], 1, frames)
    weight = annotated(targets) * mask[:, :1]
    clean = torch.where(weight > 0, targets, torch.zeros_like(targets))
    entries = weight.sum().clamp(min=1.0)
    pairs = mask[:, :1, 1:] * mask[:, :1, :-1]
    loss = stage_logits.new_zeros(())
    for logits in stage_logits:
        bce = F.binary_cross_entropy_with_logits(logits, clean, reduction="none")
        loss = loss + (bce * weight).sum() / entries
        if smooth_weight and frames > 1 and pairs.sum() > 0:
            logp = torch.stack([F.logsigmoid(logits), F.logsigmoid(-logits)])  # [2, B, K, T]
            loss = loss + smooth_weight * truncated_change(logp, pairs, tau) / (pairs.sum() * columns * 2)
    return loss


def fit_multilabel_tcn(
    train: Sequence[Video],
    val: Sequence[Video],
    val_score: Callable[[list[np.ndarray]], float],
    config: TemporalConfig | None = None,
    progress: bool = True,
) -> MultiLabelTCNResult:
    """Fit an MS-TCN with K sigmoid outputs on (features [T, D], targets [T, K]) videos.

    `val_score` gets the validation videos' probabilities [T, K] (in order) after each epoch and returns the
    number to maximise (the task's select metric); NaN (undefined) never beats a number.
    """
    config = config or TemporalConfig()
    in_dim, columns = _check_inputs(train, val)
    loop = Loop(
        "Multi-label MS-TCN",
        lambda outputs, y, mask: multilabel_tcn_loss(outputs, y, mask, config.smooth_weight, config.tau),
        _batch,
        lambda model: val_score([probabilities(model, features) for features, _ in val]),
        lambda new, best: new > best or bool(np.isnan(best)) > bool(np.isnan(new)),
        "lower --lr",
    )
    fit = fit_sigmoid_tcn(train, in_dim, columns, config, loop, progress)
    return MultiLabelTCNResult(fit.model, fit.best_epoch, fit.scores, fit.losses, fit.threads, fit.device)


def _check_inputs(train: Sequence[Video], val: Sequence[Video]) -> tuple[int, int]:
    """(D, K); one line for an empty split, mismatched shapes or a video with no annotated frame."""
    if not train or not val:
        split = "training" if not train else "validation"
        raise EvaluationError(f"No {split} videos for the multi-label MS-TCN; the {split} split is empty.")
    sizes = set()
    for split, videos in (("training", train), ("validation", val)):
        for i, (features, targets) in enumerate(videos):
            if features.ndim != 2 or targets.ndim != 2 or len(features) != len(targets) or not len(features):
                raise EvaluationError(
                    f"{split.capitalize()} video {i}: features {list(features.shape)} and targets "
                    f"{list(targets.shape)} must be [T, D] and [T, K] with the same T >= 1."
                )
            if not np.isfinite(features).all():
                raise EvaluationError(f"{split.capitalize()} video {i} has NaN/inf features.")
            sizes.add((features.shape[1], targets.shape[1]))
    if len(sizes) != 1:
        raise EvaluationError(f"Videos differ in (feature dim, columns K): {sorted(sizes)}; use one store.")
    return sizes.pop()


def _batch(videos: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
    """Features [B, D, T_max] zero-padded, targets [B, K, T_max] padded with NaN, mask [B, 1, T_max]."""
    longest, first = max(len(v[0]) for v in videos), videos[0]
    x = first[0].new_zeros(len(videos), first[0].shape[1], longest)
    y = first[1].new_full((len(videos), first[1].shape[1], longest), float("nan"))
    mask = first[0].new_zeros(len(videos), 1, longest)
    for i, (features, targets) in enumerate(videos):
        x[i, :, : len(features)], y[i, :, : len(targets)], mask[i, :, : len(features)] = (
            features.T,
            targets.T,
            1,
        )
    return x, y, mask
