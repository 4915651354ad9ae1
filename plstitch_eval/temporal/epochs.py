"""The training of the MS-TCN variants with K sigmoid-refined outputs (regression, multi-label): one seeded
fit and one loop of epochs, the best epoch kept on validation.

Why one module: the regression and multi-label variants differ only in their loss, how a batch is padded,
what validation scores and which way is better (`Loop`); the device, seed, model and epoch loop are shared.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from rich.progress import TextColumn

from plstitch_eval.errors import EvaluationError
from plstitch_eval.temporal.fit import TemporalConfig, _cuda_index
from plstitch_eval.temporal.mstcn import MultiStageTCN
from plstitch_eval.utils.console import progress_bar
from plstitch_eval.utils.device import autocast, resolve_device, resolve_precision, torch_threads

Pair = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Loop:
    """What one MS-TCN variant's epochs need: `title` (the bar's and the errors' name), `loss(stage outputs,
    targets, mask)`, `batch(videos) -> (x, y, mask)`, `score(model)`: the validation figure after an epoch,
    `better(new, best)`, and `diverged`: the fix named when the loss stops being finite."""

    title: str
    loss: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
    batch: Callable[[Sequence[Pair]], tuple[torch.Tensor, ...]]
    score: Callable[[MultiStageTCN], float]
    better: Callable[[float, float], bool]
    diverged: str


@dataclass
class Fitted:
    """A fitted variant: the model at its best epoch (eval mode), that epoch, the validation figure and mean
    training loss of every epoch, the threads and device it ran on."""

    model: MultiStageTCN
    best_epoch: int
    scores: list[float]
    losses: list[float]
    threads: int
    device: str


def to_device(video: Sequence[np.ndarray], device: torch.device) -> Pair:
    """(features [T, D], targets [T, K]) as float32 tensors on `device` (pinned, non-blocking on CUDA)."""
    pair = [torch.from_numpy(np.ascontiguousarray(a, np.float32)) for a in video]
    if device.type == "cuda":
        pair = [t.pin_memory() for t in pair]
    features, targets = (t.to(device, non_blocking=True) for t in pair)
    return features, targets


def fit_sigmoid_tcn(
    train: Sequence[Sequence[np.ndarray]], in_dim: int, outputs: int, config: TemporalConfig, loop: Loop,
    progress: bool,
) -> Fitted:  # fmt: skip
    """Seeded on `config.seed` (the global RNGs forked, so a caller's stream is untouched): an MS-TCN with
    `outputs` sigmoid-refined outputs, trained on `train` by `loop` on `config.device`."""
    device = resolve_device(config.device)
    precision = resolve_precision(config.precision, device)
    if device.type == "cuda":
        device = torch.device("cuda", _cuda_index(device))
    rng_devices = [device.index] if device.type == "cuda" else []
    with torch_threads(config.num_threads), torch.random.fork_rng(devices=rng_devices):
        torch.manual_seed(config.seed)
        sizes = (config.stages, config.layers, config.channels, config.dropout, config.causal)
        model = MultiStageTCN(in_dim, outputs, *sizes, refine="sigmoid").to(device)
        videos = [to_device(v, device) for v in train]
        best, scores, losses = train_epochs(model, videos, loop, config, precision, progress)
        threads = torch.get_num_threads()
    return Fitted(model, best, scores, losses, threads, str(device))


def train_epochs(
    model: MultiStageTCN,
    videos: list[Pair],
    loop: Loop,
    config: TemporalConfig,
    precision: str,
    progress: bool,
) -> tuple[int, list[float], list[float]]:
    """Epochs of Adam over seeded-order batches; leaves `model` at its best epoch, in eval mode. Returns (best
    epoch, validation figure per epoch, mean training loss per step of each epoch)."""
    device = next(model.parameters()).device
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    order_gen = torch.Generator().manual_seed(config.seed)
    best, best_state, scores, losses = 0, None, [], []
    with progress_bar(TextColumn("{task.fields[status]}"), disable=not progress) as bar:
        task = bar.add_task(f"{loop.title} seed {config.seed}", total=config.epochs, status="")
        for epoch in range(1, config.epochs + 1):
            model.train()
            order = torch.randperm(len(videos), generator=order_gen).tolist()
            steps = [order[i : i + config.batch_size] for i in range(0, len(order), config.batch_size)]
            total = 0.0
            for step in steps:
                x, y, mask = loop.batch([videos[i] for i in step])
                optimizer.zero_grad()
                with autocast(device, precision):
                    stage_outputs = model(x, mask)
                loss = loop.loss(stage_outputs.float(), y, mask)
                if not torch.isfinite(loss):
                    raise EvaluationError(
                        f"{loop.title} loss became {loss.item()} in epoch {epoch}; {loop.diverged}."
                    )
                loss.backward()
                optimizer.step()
                total += loss.item()
            losses.append(total / len(steps))
            scores.append(float(loop.score(model)))
            if best_state is None or loop.better(scores[-1], scores[best - 1]):
                best, best_state = epoch, {k: v.detach().clone() for k, v in model.state_dict().items()}
            bar.update(task, advance=1, status=f"val {scores[-1]:.4g}, best {scores[best - 1]:.4g} @{best}")
    model.load_state_dict(best_state)
    model.eval()
    return best, scores, losses
