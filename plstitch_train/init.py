"""`--init SPEC`: start a PL-Stitch run from a released checkpoint (everything) or any encoder (backbone).

A released `pl_*.pth` (the authors' training checkpoint; by path, registry name such as `pl-stitch-lemon`, or
`hf-hub:` file spec) continues pretraining: student and teacher backbones (the student's with `masked_embed`),
both iBOT heads, the iBOT centres, the temporal head and the jigsaw head are loaded strictly. A full iBOT
training checkpoint (`student`, `teacher`, `ibot_loss`, no PL-Stitch heads; what the authors' `--load_from`
restores from ImageNet iBOT) loads the same parts it has; the PL-Stitch heads start fresh. Any other encoder
spec fills the student and teacher backbones alone.

Layout of a released checkpoint (DDP-saved, so keys may start with `module.`):
`student` = `backbone.*` (ViT in timm naming + `masked_embed`) and `head.*` (iBOT head: `mlp.*`,
`last_layer.weight_g/_v`, `last_layer2.weight_g/_v`); `teacher` = the same without `masked_embed`, its shared
last layer listed under `last_layer` and again under `last_layer2`; `temporal_head`, `puzzle_decoder`,
`ibot_loss` (`center`, `center2`), `optimizer`, `epoch`, `args`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from plstitch_eval.errors import CheckpointError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.convert import load_strict
from plstitch_eval.hub.hub_files import parse_hf_spec
from plstitch_eval.hub.ranking_head import resolve_head_source, strip_wrappers
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.safe_load import load_checkpoint
from plstitch_eval.utils.console import logger
from plstitch_train.heads import convert_ibot_head_state_dict

__all__ = ["initialise", "is_ibot_checkpoint", "is_official_checkpoint", "load_official_checkpoint"]

HEAD_ENTRIES = ("temporal_head", "puzzle_decoder")


def is_official_checkpoint(checkpoint: Any) -> bool:
    """True for the authors' training checkpoints: `student` and `teacher` dicts plus a PL-Stitch head."""
    return (
        isinstance(checkpoint, Mapping)
        and all(isinstance(checkpoint.get(k), Mapping) for k in ("student", "teacher"))
        and any(isinstance(checkpoint.get(k), Mapping) for k in HEAD_ENTRIES)
    )


def is_ibot_checkpoint(checkpoint: Any) -> bool:
    """True for a full iBOT training checkpoint: `student` and `teacher` dicts (backbone and iBOT head) plus
    the `ibot_loss` centres - what the authors start PL-Stitch from (ImageNet iBOT, `--load_from`)."""
    return isinstance(checkpoint, Mapping) and all(
        isinstance(checkpoint.get(k), Mapping) for k in ("student", "teacher", "ibot_loss")
    )


def initialise(model: nn.Module, spec: str) -> None:
    """Fill `model` from `spec`: a released PL-Stitch checkpoint entirely, another encoder's backbone only."""
    path = _checkpoint_file(spec)
    if path is not None and path.suffix != ".safetensors":
        checkpoint = load_checkpoint(path)
        if is_official_checkpoint(checkpoint) or is_ibot_checkpoint(checkpoint):
            load_official_checkpoint(model, checkpoint, f"--init {spec}")
            return
    init_backbones(model, spec)


def _checkpoint_file(spec: str) -> Path | None:
    """The checkpoint file `spec` names (a file, a registry entry's raw file, an hf-hub file), else None."""
    if spec in MODELS:
        local = MODELS[spec].resolve_local_path()
        names_file = local.is_file() if local is not None else MODELS[spec].filename is not None
    elif spec.startswith("hf-hub:"):
        names_file = parse_hf_spec(spec)[1] is not None
    else:
        names_file = Path(spec).expanduser().is_file()
    return resolve_head_source(spec, folder_files=None) if names_file else None


def init_backbones(model: nn.Module, spec: str) -> None:
    """Student and teacher ViTs <- the encoder `spec` (strict); every head starts fresh."""
    encoder = load_encoder(spec, device="cpu")
    state = encoder.model.state_dict()
    for branch in (model.student, model.teacher):
        load_strict(branch["backbone"].vit, state, source=f"--init {spec}")
    fresh = ["student masked_embed"] + [f"student {name}" for name in model.student if name != "backbone"]
    fresh += [f"teacher {name}" for name in model.teacher if name != "backbone"]
    logger.info("--init %s: loaded the student and teacher backbones.", spec)
    logger.info("--init %s: starting fresh: %s.", spec, ", ".join(fresh))


def _split(state: Mapping[str, Tensor], source: str) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """A MultiCropWrapper state dict -> (backbone tensors, iBOT head tensors), prefixes removed."""
    backbone = {k.removeprefix("backbone."): v for k, v in state.items() if k.startswith("backbone.")}
    head = {k.removeprefix("head."): v for k, v in state.items() if k.startswith("head.")}
    other = sorted(k for k in state if not k.startswith(("backbone.", "head.")))
    if other or not backbone:
        raise CheckpointError(
            f"{source}: expected only backbone.* and head.* keys, found {other[:10] or 'no backbone.*'}. "
            "Nothing was loaded."
        )
    return backbone, head


def _drop_shared_alias(head: dict[str, Tensor], source: str) -> dict[str, Tensor]:
    """The teacher's shared last layer appears twice (`last_layer`, `last_layer2`); keep one, check equal."""
    alias = {k: v for k, v in head.items() if k.startswith("last_layer2.")}
    for key, value in alias.items():
        twin = head.get(key.replace("last_layer2.", "last_layer.", 1))
        if twin is None or not torch.equal(twin, value):
            raise CheckpointError(
                f"{source}: teacher head has a {key} that differs from its last_layer; a teacher with "
                "separate CLS and patch last layers is not the PL-Stitch layout. Nothing was loaded."
            )
    return {k: v for k, v in head.items() if k not in alias}


def load_official_checkpoint(model: nn.Module, checkpoint: Mapping[str, Any], source: str) -> None:
    """Load every part of a released PL-Stitch checkpoint that `model` has, strictly; log what starts fresh.

    Parts the model lacks (a branch switched off) are reported as unused, never half-loaded.
    """
    student_vit, student_head = _split(strip_wrappers(checkpoint["student"]), f"{source} student")
    teacher_vit, teacher_head = _split(strip_wrappers(checkpoint["teacher"]), f"{source} teacher")
    loaded: list[str] = []
    unused: list[str] = []
    fresh: list[str] = []
    if "masked_embed" not in student_vit:
        raise CheckpointError(f"{source}: student has no backbone.masked_embed. Nothing was loaded.")
    masked_embed = student_vit.pop("masked_embed")
    if teacher_vit.pop("masked_embed", None) is not None:
        unused.append("teacher masked_embed (the teacher never sees masks)")
    student_backbone = {f"vit.{k}": v for k, v in student_vit.items()} | {"masked_embed": masked_embed}
    load_strict(model.student["backbone"], student_backbone, f"{source} (student backbone)")
    load_strict(
        model.teacher["backbone"], {f"vit.{k}": v for k, v in teacher_vit.items()}, f"{source} (teacher)"
    )
    loaded += ["student backbone + masked_embed", "teacher backbone"]

    if "ibot_head" in model.student:
        load_strict(
            model.student["ibot_head"],
            convert_ibot_head_state_dict(student_head),
            f"{source} (student iBOT head; ibot_out_dim/hidden/bottleneck must match)",
        )
        load_strict(
            model.teacher["ibot_head"],
            convert_ibot_head_state_dict(_drop_shared_alias(teacher_head, source)),
            f"{source} (teacher iBOT head)",
        )
        loaded += ["student iBOT head (last_layer + last_layer2)", "teacher iBOT head (shared last layer)"]
        centres = checkpoint.get("ibot_loss")
        if isinstance(centres, Mapping) and {"center", "center2"} <= set(centres):
            load_strict(
                model.ibot_loss,
                {k: centres[k] for k in ("center", "center2")},
                f"{source} (iBOT centres)",
            )
            loaded.append("iBOT centres")
        else:
            fresh.append("iBOT centres")
    elif student_head or teacher_head:
        unused.append("iBOT heads (lambda_mim = 0)")

    for entry, name in (("temporal_head", "temporal_head"), ("puzzle_decoder", "jigsaw_head")):
        state = checkpoint.get(entry)
        has = name in model.student
        if isinstance(state, Mapping) and has:
            load_strict(model.student[name], strip_wrappers(state), f"{source} ({entry})")
            loaded.append(f"{name} (from {entry})")
        elif isinstance(state, Mapping):
            unused.append(f"{entry} (this run has no {name})")
        elif has:
            fresh.append(name)
    fresh += [
        name
        for name in model.student
        if name not in ("backbone", "ibot_head", "temporal_head", "jigsaw_head")
    ]
    others = sorted(str(k) for k in checkpoint if k not in ("student", "teacher", "ibot_loss", *HEAD_ENTRIES))
    if others:
        unused.append(f"{', '.join(others)} (the run starts at step 0 with its own optimizer and schedules)")
    logger.info("%s: loaded %s.", source, "; ".join(loaded))
    if fresh:
        logger.info("%s: starting fresh: %s.", source, "; ".join(fresh))
    if unused:
        logger.info("%s: not used: %s.", source, "; ".join(unused))
