"""Where an export's weights come from and reading them: a run folder (finished: `backbone/`; unfinished: its
`last.ckpt`), a timm folder or a checkpoint file - the backbone, the temporal head and the training config.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import timm
import torch
from torch import nn

from plstitch_eval.errors import PublishError, RunFolderError
from plstitch_eval.hub.convert import (
    CONVNEXT_TOP_LEVEL,
    VIT_TOP_LEVEL,
    find_num_heads,
    load_strict,
    model_from_checkpoint,
    split_backbone,
    unwrap_state_dict,
)
from plstitch_eval.hub.ranking_head import (
    HEAD_CONFIG_FILE,
    load_temporal_head,
    save_temporal_head,
    temporal_head_from_state_dict,
)
from plstitch_eval.hub.run_folder import (
    BACKBONE_DIR,
    CHECKPOINT_NAME,
    backbone_dir,
    is_finished,
    is_run_dir,
    read_train_config,
)
from plstitch_eval.hub.safe_load import load_checkpoint, sha256_file
from plstitch_eval.hub.timm_format import (
    CONFIG_NAME,
    WEIGHTS_NAME,
    is_timm_dir,
    load_timm_dir,
    read_data_config,
)
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.utils.console import logger
from plstitch_train.config import flat_settings
from plstitch_train.model import build_vit
from plstitch_train.run.status import RunProgress, run_progress, trainer_config

__all__ = [
    "ExportSource",
    "load_backbone",
    "resolve_source",
    "source_train_config",
    "source_weights_sha256",
    "teacher_state",
    "temporal_head_tensors",
    "training_status",
    "write_temporal_head",
]


@dataclass
class ExportSource:
    """Where the backbone, temporal head and training config of an export come from."""

    path: Path
    run_dir: Path | None
    checkpoint: Path | None
    backbone_dir: Path | None


def resolve_source(source: str | os.PathLike) -> ExportSource:
    """A run directory (finished: `backbone/`; unfinished: its `last.ckpt`), a timm folder, or a checkpoint
    file (run dir = its folder)."""
    path = Path(source).expanduser()
    if path.is_dir():
        if is_finished(path):
            return ExportSource(path, path, None, backbone_dir(path))
        if is_timm_dir(path):
            return ExportSource(path, None, None, path)
        if (path / CHECKPOINT_NAME).is_file():  # an unfinished run: its latest checkpoint
            return ExportSource(path, path, path / CHECKPOINT_NAME, None)
        if is_run_dir(path):
            raise PublishError(
                f"{path} is a training run stopped before its first checkpoint (no {CHECKPOINT_NAME}), so it "
                f"holds no trained weights; resume it with `plstitch train --resume {path}`."
            )
        raise PublishError(
            f"{path} is neither a training run directory ({BACKBONE_DIR}/ or {CHECKPOINT_NAME}) nor a timm "
            f"folder ({CONFIG_NAME} + {WEIGHTS_NAME}); pass a run directory, its {CHECKPOINT_NAME} or an "
            "exported folder."
        )
    if path.is_file():
        run_dir = path.parent
        return ExportSource(path, run_dir, path, backbone_dir(run_dir) if is_finished(run_dir) else None)
    raise PublishError(f"{path} does not exist; pass a training run directory or a checkpoint file.")


def teacher_state(checkpoint: Any) -> tuple[dict[str, torch.Tensor], list[str]]:
    """(teacher tensors without containers and prefixes, the trainer's `vit.` too; leftover head keys)."""
    state = unwrap_state_dict(checkpoint, "teacher")
    leftovers = sorted(k for k in state if k.startswith(("teacher.", "student.")))
    kept = {key.removeprefix("vit."): tensor for key, tensor in state.items() if key not in leftovers}
    return kept, leftovers


def load_backbone(src: ExportSource, checkpoint: Any = None) -> tuple[nn.Module, DataConfig, list[str]]:
    """(backbone in eval mode, eval preprocessing, dropped training-only keys), loaded strictly.

    A checkpoint's teacher weights fill the architecture recorded in the run's `backbone/config.json` when
    there is one (exact constructor arguments), else the one its `plstitch train` config builds (as the
    trainer builds the teacher it exports), else the architecture inferred from the tensor shapes.
    `checkpoint` is the already loaded `src.checkpoint` (loaded here when None).
    """
    if src.checkpoint is None:
        model, data_config = load_timm_dir(src.backbone_dir)
        return model, data_config, []
    if checkpoint is None:
        checkpoint = load_checkpoint(src.checkpoint)
    state, leftovers = teacher_state(checkpoint)
    config = trainer_config(checkpoint)
    if src.backbone_dir is not None:
        timm_config = json.loads((src.backbone_dir / CONFIG_NAME).read_text(encoding="utf-8"))
        model = timm.create_model(
            timm_config["architecture"],
            pretrained=False,
            num_classes=timm_config.get("num_classes", 0),
            **timm_config["model_args"],
        )
        data_config = read_data_config(src.backbone_dir)
        convnext = timm_config["architecture"].startswith("convnext")
        top_level = CONVNEXT_TOP_LEVEL if convnext else VIT_TOP_LEVEL
    elif config is not None:  # an unfinished run: what `trainer.export_backbone` would have written
        model, data_config = build_vit(config.model, 0.0), DataConfig.for_size(config.model.img_size)
        top_level = VIT_TOP_LEVEL
    else:
        num_heads = find_num_heads(checkpoint)
        model, dropped = model_from_checkpoint(state, "teacher", num_heads, source=str(src.checkpoint))
        size = model.patch_embed.img_size[0] if hasattr(model, "patch_embed") else 224
        return model.eval(), DataConfig.for_size(size), sorted(dropped + leftovers)
    backbone, dropped = split_backbone(state, top_level)
    load_strict(model, backbone, str(src.checkpoint))
    return model.eval(), data_config, sorted(dropped + leftovers)


def write_temporal_head(src: ExportSource, checkpoint: Any, out_dir: Path) -> bool:
    """Put the temporal head into `out_dir`: the checkpoint's weights when it has them, else `backbone/`'s.

    Constructor arguments come from `backbone/temporal_head.json`, or for an unfinished run from its training
    config (attention heads, dropout) and the tensor shapes, as `load_temporal_head(last.ckpt)` reads them.
    Returns False when there is no head; warns when the checkpoint has one whose heads it does not record.
    """
    state = temporal_head_tensors(checkpoint) if checkpoint is not None else {}
    source = f"{src.checkpoint} (temporal head)"
    settings = checkpoint.get("config") if isinstance(checkpoint, Mapping) else None
    settings = flat_settings(settings) if isinstance(settings, Mapping) else {}
    if src.backbone_dir is not None and (src.backbone_dir / HEAD_CONFIG_FILE).is_file():
        head = load_temporal_head(src.backbone_dir)  # refuses weights that do not match the json
        if state:
            load_strict(head, state, source)
    elif state and isinstance(settings.get("temporal_heads"), int):
        dropout = float(settings.get("temporal_dropout", 0.1))
        head = temporal_head_from_state_dict(state, settings["temporal_heads"], dropout, source)
    else:
        if state:
            logger.warning(
                "%s has temporal-head weights but its config does not record `temporal_heads` (attention "
                "heads cannot be read from tensor shapes); exporting the backbone only.",
                src.checkpoint,
            )
        return False
    save_temporal_head(head, out_dir)
    return True


def temporal_head_tensors(checkpoint: Any) -> dict[str, torch.Tensor]:
    """`*temporal_head.<name>` tensors of a training checkpoint (student side), keyed by `<name>`."""
    if not isinstance(checkpoint, Mapping):
        return {}
    container = next(
        (checkpoint[k] for k in ("model", "state_dict") if isinstance(checkpoint.get(k), Mapping)), None
    )
    container = checkpoint if container is None else container
    marker = "temporal_head."
    return {
        key.split(marker, 1)[1]: tensor
        for key, tensor in container.items()
        if isinstance(tensor, torch.Tensor) and marker in key and not key.startswith("teacher.")
    }


def source_train_config(src: ExportSource, checkpoint: Any = None) -> dict[str, Any]:
    """`train_config.json` of the run, else the checkpoint's `config` entry, else {}; in the flat form
    (`{name: value}`, as exports record it) whichever form the run saved."""
    if src.run_dir is not None:
        try:
            settings = read_train_config(src.run_dir)
        except RunFolderError as exc:
            raise PublishError(str(exc)) from exc
        if settings is not None:
            return flat_settings(settings)
    if checkpoint is not None:
        config = checkpoint.get("config") if isinstance(checkpoint, dict) else None
        if isinstance(config, dict):
            return flat_settings(config)
    return {}


def training_status(src: ExportSource, checkpoint: Any) -> RunProgress | None:
    """How far an unfinished run's checkpoint got; None for a finished run, a timm folder, a foreign file."""
    if src.run_dir is None or src.backbone_dir is not None or checkpoint is None:
        return None
    config = trainer_config(checkpoint)
    if config is None or not isinstance(checkpoint.get("step"), int):
        return None
    return run_progress(checkpoint, config)


def source_weights_sha256(src: ExportSource) -> str:
    """sha256 of the source file holding the exported weights unchanged: what `extract --model SOURCE` records
    (a run's or timm folder's `model.safetensors`; a checkpoint file, whose teacher is exported)."""
    return sha256_file(src.checkpoint if src.checkpoint is not None else src.backbone_dir / WEIGHTS_NAME)
