"""Effective gradient scale of each active branch: |d(lambda * L) / d(student backbone)| as a run starts.

Why: at equal loss weight the L_vid objectives (`pl`, `pairwise`, `permutation`) push the backbone with very
different gradient magnitudes, so the objective ablation reports this scale beside each objective's row.
"""

from __future__ import annotations

import contextlib
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils.data import default_collate

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.device import resolve_device
from plstitch_train.config import BRANCH_NAMES, TrainConfig, branch_weights
from plstitch_train.data import TrainingData, build_training_data, open_frame_store
from plstitch_train.model import PLStitchModel
from plstitch_train.run.rng import capture_rng, restore_rng, seed_everything

__all__ = ["BRANCHES", "active_branches", "branch_gradient_norms", "objective_gradient_scale"]

BRANCHES = BRANCH_NAMES  # the branch names, from their home (config/branches.py)


def active_branches(config: TrainConfig) -> dict[str, float]:
    """{branch: weight} of the branches `config` trains (weight > 0), in forward order; jigsaw at full
    weight (its ramp ignored)."""
    weights = branch_weights(config.loss)
    return {name: float(weight) for name, weight in weights.items() if weight > 0}


def _norm(grads: list[Tensor | None]) -> float:
    """L2 norm over all tensors together (None = an unused parameter, gradient 0), accumulated in float64."""
    squares = [g.detach().double().pow(2).sum() for g in grads if g is not None]
    return float(torch.stack(squares).sum().sqrt()) if squares else 0.0


@contextlib.contextmanager
def _buffers_kept(model: nn.Module) -> Iterator[None]:
    """Restore every buffer of `model` on exit (the iBOT loss updates its centre in train mode)."""
    saved = [(buffer, buffer.detach().clone()) for buffer in model.buffers()]
    try:
        yield
    finally:
        with torch.no_grad():
            for buffer, value in saved:
                buffer.copy_(value)


def branch_gradient_norms(
    model: PLStitchModel, batch: dict[str, Tensor], branch: str, weight: float
) -> dict[str, float]:
    """`loss` (unweighted), `backbone_grad_norm` (L2 norm over the trainable student backbone parameters of
    d(weight * loss)/d params) and, for `vid`, `feature_grad_norm` (of d(weight * L_vid)/d(backbone output),
    nonzero only at the CLS tokens the head reads: the [B, k, D] frame features).

    A measurement: gradients come from `torch.autograd.grad`, so no `.grad` is written, no weight changes,
    and every buffer is restored. The model runs in its current mode.
    """
    backbone = model.student["backbone"]
    params = [p for p in backbone.parameters() if p.requires_grad]
    outputs: list[Tensor] = []
    hook = (
        backbone.register_forward_hook(lambda module, args, out: outputs.append(out))
        if branch == "vid"
        else None
    )
    try:
        with _buffers_kept(model), torch.enable_grad():
            loss = model.branch_loss(branch, batch, epoch=0)
    finally:
        if hook is not None:
            hook.remove()
    if branch == "vid" and len(outputs) != 1:
        raise ConfigError(f"video_loss ran the student backbone {len(outputs)} times; expected once.")
    grads = torch.autograd.grad(weight * loss, [*outputs, *params], allow_unused=True)
    result = {"loss": float(loss.detach()), "backbone_grad_norm": _norm(list(grads[len(outputs) :]))}
    if outputs:
        result["feature_grad_norm"] = _norm([grads[0]])
    return result


def _batches(data: TrainingData, n_batches: int) -> Iterator[dict[str, Tensor]]:
    """The first `n_batches` batches of the sampler, epoch after epoch, collated as the trainer's loader."""
    sampler = data.sampler
    if sampler.batches_per_epoch < 1:
        raise ConfigError("The training data holds no full batch; lower the batch size or add videos.")
    drawn, epoch = 0, 0
    while drawn < n_batches:
        sampler.set_position(epoch, 0)
        for specs in sampler:
            yield default_collate([data.dataset[spec] for spec in specs])
            drawn += 1
            if drawn == n_batches:
                return
        epoch += 1


def objective_gradient_scale(
    config: TrainConfig, n_batches: int = 8, seed: int = 0, cache_dir: str | Path | None = None
) -> dict[str, Any]:
    """Loss and backbone gradient norm of each active branch's weighted loss, averaged over `n_batches`.

    The model is built as a run starts (`seed_everything(config.run.seed)`, then `PLStitchModel(config)`, so
    `model.init` loads the shared initialisation and the heads are fresh) and run in train mode on
    `config.run.device` in fp32. Batches come from the run's own data pipeline with the sampler seed `seed`;
    drop path, dropout and the permutation objective's shuffles are seeded by `seed` too. Each branch is
    measured on its own at the initial state (see `branch_gradient_norms`; the iBOT centre is restored after
    every batch): nothing is stepped, and torch's, numpy's and python's global RNG states are restored, so a
    later run is unchanged. Frames are decoded into `cache_dir`, else `config.frames.cache_dir`, else a
    temporary folder removed afterwards (a frames LMDB `--data` is read as it is).

    Returns {"n_batches", "seed", "objective", "clip_len", "branches": {branch: {"loss", "weight",
    "backbone_grad_norm", "backbone_grad_norm_std" (sample std over batches, 0 for one), and for vid
    "feature_grad_norm"}}}; losses are unweighted, gradient norms are of weight * loss.
    """
    if n_batches < 1:
        raise ConfigError(f"n_batches must be >= 1, got {n_batches}.")
    config.validate()
    branches = active_branches(config)
    device = resolve_device(config.run.device)
    rng_state = capture_rng(device)
    try:
        with contextlib.ExitStack() as stack:
            cache = cache_dir or config.frames.cache_dir
            if cache is None:
                cache = stack.enter_context(tempfile.TemporaryDirectory(prefix="plstitch-frames-"))
            store = open_frame_store(config, Path(cache))
            seed_everything(config.run.seed)  # as the trainer: the initial weights of the run
            model = PLStitchModel(config).to(device)
            model.train()
            data = build_training_data(
                config.with_changes(seed=seed), store, model.student["backbone"].grid_size
            )
            seed_everything(seed)
            records: dict[str, list[dict[str, float]]] = {name: [] for name in branches}
            for batch in _batches(data, n_batches):
                batch = {key: value.to(device) for key, value in batch.items()}
                for name, weight in branches.items():
                    records[name].append(branch_gradient_norms(model, batch, name, weight))
    finally:
        restore_rng(rng_state, device)
    summary: dict[str, dict[str, float]] = {}
    for name, weight in branches.items():
        rows = records[name]
        norms = [row["backbone_grad_norm"] for row in rows]
        entry = {
            "loss": statistics.fmean(row["loss"] for row in rows),
            "weight": weight,
            "backbone_grad_norm": statistics.fmean(norms),
            "backbone_grad_norm_std": statistics.stdev(norms) if len(norms) > 1 else 0.0,
        }
        if name == "vid":
            entry["feature_grad_norm"] = statistics.fmean(row["feature_grad_norm"] for row in rows)
        summary[name] = entry
    return {
        "n_batches": n_batches,
        "seed": seed,
        "objective": config.loss.objective,
        "clip_len": config.sampling.clip_len,
        "branches": summary,
    }
