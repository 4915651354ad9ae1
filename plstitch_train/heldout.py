"""Held-out jigsaw loss of a trained run: L_jigsaw on videos the run never saw, beside its chance level.

Why: a falling training loss can be memorisation; the same loss on the test split's frames (the run's own
sampling, augmentation and block masks, a fixed seed) says whether the jigsaw head learned the task. Chance is
the loss of constant scores: with N patches every Plackett-Luce step picks uniformly among those left, so
L_PL / N = log(N!) / N (3.21 for an 8 x 8 grid).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import default_collate

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.run_folder import frame_cache_dir
from plstitch_train.config import TrainConfig
from plstitch_train.data import build_training_data, open_frame_store
from plstitch_train.model import PLStitchModel
from plstitch_train.run.checkpoint import load_training_checkpoint

__all__ = ["heldout_jigsaw_loss", "jigsaw_chance"]


def jigsaw_chance(n_patches: int) -> float:
    """L_jigsaw of uniform scores over `n_patches` items in the per-item normalisation: log(N!) / N."""
    if n_patches < 1:
        raise ConfigError(f"n_patches must be >= 1, got {n_patches}.")
    return math.lgamma(n_patches + 1) / n_patches


@torch.no_grad()
def heldout_jigsaw_loss(
    run_dir: str | Path,
    dataset: str,
    split: str | None,
    root: str | None = None,
    n_batches: int = 8,
    seed: int = 0,
    cache_dir: str | Path | None = None,
) -> dict[str, Any] | None:
    """Mean L_jigsaw of the run's student on `n_batches` batches of `dataset`/`split`; None without a head.

    The model is rebuilt from the run's `last.ckpt` (strict load) and run in eval mode; samples are drawn by
    the run's own sampler settings with `seed`, in forward time, so every run is scored on the same items.
    """
    checkpoint = load_training_checkpoint(run_dir)
    saved = TrainConfig.from_dict(checkpoint["config"])
    if saved.loss.lambda_jigsaw <= 0:
        return None
    # the weights come from the checkpoint: no --init, forward time, the requested videos and seed
    config = saved.with_changes(
        init=None, reverse_time=False, dataset=dataset, root=root, split=split, data=None, seed=seed
    )
    model = PLStitchModel(config)
    model.load_state_dict(checkpoint["model"], strict=True)
    model.eval()
    cache = Path(cache_dir or config.frames.cache_dir or frame_cache_dir(run_dir))
    store = open_frame_store(config, cache)
    grid = model.student["backbone"].grid_size
    data = build_training_data(config, store, grid)
    losses = []
    for specs in data.sampler:
        if len(losses) == n_batches:
            break
        batch = default_collate([data.dataset[spec] for spec in specs])
        losses.append(float(model.jigsaw_loss(batch["context"], batch["masks"][:, 2])))
    chance = jigsaw_chance(grid[0] * grid[1])
    loss = sum(losses) / len(losses)
    return {
        "loss": loss,
        "chance": chance,
        "minus_chance": loss - chance,
        "batches": len(losses),
        "samples": len(losses) * data.sampler.batch_size,
        "dataset": dataset,
        "split": split,
        "seed": seed,
    }
