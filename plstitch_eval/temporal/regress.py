"""Train a (causal) MS-TCN to regress per-frame continuous targets; keep the epoch best on validation videos.

Why: anticipation (minutes until each phase / tool next occurs, clipped at a horizon) and remaining surgery
duration are per-frame regressions over the same frozen features the phase probe uses. The network is
``MultiStageTCN(refine="sigmoid")`` with K outputs: stages 2..S refine ``sigmoid(previous) * mask``, so the
caller scales the targets to about [0, 1] (e.g. divided by the horizon) and unscales the predictions, which
are the raw (unsquashed) last-stage outputs.

Loss, summed over stages (as MS-TCN sums its per-stage losses): the mean squared error over the real
(unpadded) frames x K, plus ``smooth_weight`` x the mean over real consecutive-frame pairs x K of
``clamp((z[t] - z.detach()[t-1])^2, 0, tau^2)`` on the raw outputs z - MS-TCN's smoothing term, on outputs
instead of log-probabilities and averaged over real frames only (0 for one-frame videos). The training loop
follows ``fit.py``'s (Adam, seeded video order, padded batches, autocast, seeded and forked torch
generator, fixed threads); after every epoch ``val_error`` scores the validation predictions and the lowest
error's weights are kept (ties: the earliest). ``select_metric`` of the config is not used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from plstitch_eval.errors import EvaluationError
from plstitch_eval.temporal.epochs import Loop, fit_sigmoid_tcn
from plstitch_eval.temporal.fit import TemporalConfig, video_logits
from plstitch_eval.temporal.mstcn import MultiStageTCN, truncated_change

Video = tuple[np.ndarray, np.ndarray]  # (features [T, D] float32, targets [T, K] scaled to ~[0, 1])


@dataclass
class TemporalRegressionResult:
    """The model at its lowest validation error (eval mode), that epoch (1-based), the per-epoch curves, and
    the CPU threads and device of the fit (they change the float rounding)."""

    model: MultiStageTCN
    best_epoch: int
    val_scores: list[float]  # val_error after epoch 1, 2, ... (lower is better)
    train_losses: list[float]  # mean loss per step of each epoch
    threads: int
    device: str

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Outputs [T, K] (float64) of one video's features [T, D]: the last stage, whole video, eval mode."""
        return _predict(self.model, features)


def fit_temporal_regression(
    train: Sequence[Video],
    val: Sequence[Video],
    val_error: Callable[[list[np.ndarray]], float],
    config: TemporalConfig | None = None,
    progress: bool = True,
) -> TemporalRegressionResult:
    """Fit an MS-TCN with K sigmoid-refined outputs on (features [T, D], targets [T, K]) videos.

    `val_error` gets the predictions [T, K] of the validation videos (in order) after each epoch and returns
    the number to minimise. `progress`: a bar per epoch on stderr, as `fit_temporal`'s.
    """
    config = config or TemporalConfig()
    in_dim, outputs = _check_inputs(train, val)
    epochs = iter(range(1, config.epochs + 1))

    def score(model: MultiStageTCN) -> float:
        error, epoch = float(val_error([_predict(model, features) for features, _ in val])), next(epochs)
        if not np.isfinite(error):
            raise EvaluationError(f"val_error gave {error} after epoch {epoch}; it must be finite.")
        return error

    loop = Loop(
        "MS-TCN regression",
        lambda outputs_, y, mask: regression_loss(outputs_, y, mask, config.smooth_weight, config.tau),
        _batch,
        score,
        lambda new, best: new < best,
        "lower --lr or check the target scaling",
    )
    fit = fit_sigmoid_tcn(train, in_dim, outputs, config, loop, progress)
    return TemporalRegressionResult(
        fit.model, fit.best_epoch, fit.scores, fit.losses, fit.threads, fit.device
    )


def regression_loss(
    stage_outputs: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, smooth_weight: float, tau: float
) -> torch.Tensor:
    """Sum over stages of the MSE on real frames + `smooth_weight` x truncated squared frame-to-frame change.

    `stage_outputs` [S, B, K, T], `targets` [B, K, T], `mask` [B, 1, T] (1 = a real frame, 0 = padding).
    """
    outputs = stage_outputs.shape[2]
    mse = ((stage_outputs - targets) ** 2 * mask).sum((1, 2, 3)) / (mask.sum() * outputs)
    loss = mse.sum()
    pairs = mask[:, :, 1:] * mask[:, :, :-1]
    if smooth_weight and pairs.sum() > 0:
        loss = loss + smooth_weight * truncated_change(stage_outputs, pairs, tau) / (pairs.sum() * outputs)
    return loss


def _check_inputs(train: Sequence[Video], val: Sequence[Video]) -> tuple[int, int]:
    """(D, K) of the videos; one-line errors for empty splits, mixed sizes or non-finite values."""
    if not train:
        raise EvaluationError("No training videos for the temporal regression; the training split is empty.")
    if not val:
        raise EvaluationError("No validation videos to choose the temporal regression's epoch on.")
    sizes = set()
    for split, videos in (("training", train), ("validation", val)):
        for i, (features, targets) in enumerate(videos):
            x, y = np.asarray(features), np.asarray(targets)
            if x.ndim != 2 or y.ndim != 2 or len(x) != len(y) or len(x) == 0:
                raise EvaluationError(
                    f"{split.capitalize()} video {i}: features {list(x.shape)} and targets {list(y.shape)} "
                    "must be [T, D] and [T, K] with the same T >= 1."
                )
            if not (np.isfinite(x).all() and np.isfinite(y).all()):
                raise EvaluationError(f"{split.capitalize()} video {i} has non-finite features or targets.")
            sizes.add((x.shape[1], y.shape[1]))
    if len(sizes) != 1:
        raise EvaluationError(f"Videos differ in (feature dim, targets K): {sorted(sizes)}; they must agree.")
    return sizes.pop()


def _batch(videos: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
    """Features [B, D, T_max] and targets [B, K, T_max] zero-padded, mask [B, 1, T_max] (1 = real frame)."""
    joined = [torch.cat(v, dim=1) for v in videos]  # [T, D + K]
    padded = torch.nn.utils.rnn.pad_sequence(joined, batch_first=True).transpose(1, 2)
    in_dim = videos[0][0].shape[1]
    mask = torch.zeros_like(padded[:, :1])
    for i, v in enumerate(videos):
        mask[i, :, : len(v[0])] = 1.0
    return padded[:, :in_dim], padded[:, in_dim:], mask


def _predict(model: MultiStageTCN, features: np.ndarray) -> np.ndarray:
    """Last-stage outputs [T, K] float64 of one video, as `TemporalRegressionResult.predict`."""
    return video_logits(model, features).T.numpy().astype(np.float64)
