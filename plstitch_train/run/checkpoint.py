"""The trainer's checkpoint file (`last.ckpt`): writing it, reading it back (anything else is refused in one
line), restoring a run from it, and exporting the finished teacher backbone.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from plstitch_eval.errors import TrainingError
from plstitch_eval.hub.ranking_head import save_temporal_head
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, backbone_dir, checkpoint_path
from plstitch_eval.hub.timm_format import save_timm_dir
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.distributed import DistInfo
from plstitch_eval.utils.io import atomic_path, temp_dir_beside
from plstitch_train.config import ModelConfig, TrainConfig
from plstitch_train.model import PLStitchModel
from plstitch_train.run.rng import capture_rng, restore_rng
from plstitch_train.sampling import TrainSampler

CHECKPOINT_FORMAT = 1


def load_training_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """A run folder's (or file's) training checkpoint, read `weights_only`; TrainingError if it is not ours.

    Unlike `plstitch_eval.hub.safe_load.load_checkpoint` (any checkpoint file) it checks the trainer's format.
    Every refusal is one line: the file, what it holds instead, what a training checkpoint is.
    """
    path = checkpoint_path(path)
    if not path.is_file():
        raise TrainingError(
            f"Cannot resume: {path} does not exist; pass a run folder or its {CHECKPOINT_NAME}."
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means "not our checkpoint"
        raise TrainingError(_not_a_checkpoint(path, _unreadable_reason(path, exc))) from exc
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise TrainingError(_not_a_checkpoint(path, _foreign_content(checkpoint)))
    return checkpoint


def _not_a_checkpoint(path: Path, reason: str) -> str:
    """The one-line refusal of `path`: why, what a training checkpoint is, and how to use weights instead."""
    return (
        f"Cannot read {path} as a training checkpoint: {reason}. A training checkpoint is a run's "
        f"{CHECKPOINT_NAME} (written by `plstitch train --out RUN`): pass a run folder or its "
        f"{CHECKPOINT_NAME}; to start from a model's weights, use --init FILE."
    )


def _unreadable_reason(path: Path, exc: BaseException) -> str:
    """Why `torch.load(weights_only=True)` could not read `path`, in words (never the loader's own essay)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError as error:
        return f"it cannot be opened ({error.strerror or error})"
    if not head:
        return "the file is empty"
    if not head.startswith((b"PK", b"\x80")):  # torch.save writes a zip archive (or, legacy, a pickle)
        return "it is not a file written by torch.save (text or other data)"
    if "Weights only load failed" in str(exc):
        return "it holds Python objects besides tensors and plain values, which no plstitch checkpoint does"
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"it is damaged or cut off ({_short_text(first_line)})"


def _foreign_content(content: object) -> str:
    """What a readable file that is no training checkpoint of ours holds, e.g. "model weights (keys ...)"."""
    if not isinstance(content, dict):
        return f"it holds a {type(content).__name__}, not a checkpoint dict"
    if "format" in content:
        found = _short_text(json.dumps(content["format"]), 40)
        return f"it has checkpoint format {found}; this version reads {CHECKPOINT_FORMAT}"
    keys = ", ".join(str(key) for key in list(content)[:4]) + (", ..." if len(content) > 4 else "")
    return f"it holds model weights or other data (keys: {_short_text(keys, 60)}) but no training state"


def _short_text(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def save_checkpoint(
    path: Path,
    config: TrainConfig,
    model: PLStitchModel,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    sampler: TrainSampler,
    step: int,
    info: DistInfo,
    device: torch.device,
) -> None:
    """Atomically write everything an exact resume needs (every rank's RNG state is gathered on rank 0)."""
    rng = capture_rng(device)
    rng_states = [rng]
    if info.world_size > 1:
        rng_states = [None] * info.world_size
        dist.all_gather_object(rng_states, rng)
    if not info.is_main:
        return
    checkpoint = {
        "format": CHECKPOINT_FORMAT,
        # the flat form: readers outside the trainer (plstitch_eval.hub.ranking_head, which may not import
        # it) take `temporal_heads` from here; TrainConfig.from_dict reads either form
        "config": config.to_flat_dict(),
        "step": step,
        "world_size": info.world_size,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
        "sampler": sampler.state_dict(),  # global micro-batch index: valid for any world size at this batch
        "rng": rng_states,
    }
    with atomic_path(path) as tmp:
        torch.save(checkpoint, tmp)


def restore_checkpoint(
    checkpoint: dict[str, Any],
    model: PLStitchModel,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    sampler: TrainSampler,
    info: DistInfo,
    device: torch.device,
) -> int:
    """Load model, optimizer, scaler and RNG state; returns the step to continue from."""
    try:
        model.load_state_dict(checkpoint["model"], strict=True)
        optimizer.load_state_dict(checkpoint["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise TrainingError(f"Checkpoint does not match the model built from its config: {exc}") from exc
    if "sampler" in checkpoint:
        sampler.load_state_dict(checkpoint["sampler"])
    if checkpoint.get("scaler"):
        scaler.load_state_dict(checkpoint["scaler"])
    rng_states = checkpoint.get("rng", [])
    if len(rng_states) == info.world_size:
        restore_rng(rng_states[info.rank], device)
    else:
        logger.warning(
            "Checkpoint was written by %d processes, resuming with %d: data order is exact, "
            "dropout/drop-path RNG is re-seeded.",
            len(rng_states),
            info.world_size,
        )
    return int(checkpoint["step"])


def export_backbone(model: PLStitchModel, out_dir: Path, settings: ModelConfig) -> Path:
    """Teacher ViT in timm format (+ temporal head) under `out_dir/backbone`, which `load_encoder` reads;
    `settings` is the run's `model` section (its `img_size` sets the evaluation preprocessing).

    Why atomic (staged folder, then one rename): a run counts as finished exactly when the folder exists.
    """
    target = backbone_dir(out_dir)
    staging = temp_dir_beside(target)  # whole folder renamed into place: its presence means "finished"
    try:
        save_timm_dir(model.teacher["backbone"].vit, staging, DataConfig.for_size(settings.img_size))
        if "temporal_head" in model.student:
            save_temporal_head(model.student["temporal_head"], staging)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target
