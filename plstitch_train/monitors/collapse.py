"""Collapse caught while it happens: every `collapse_every` steps the trainer measures the teacher's iBOT
branch on a fixed probe batch with `collapse_probe.collapse_measures`, logs the measures (`collapse_*` keys in
the step's record) and, once the teacher has collapsed, warns once (and with `stop_on_collapse` stops the run
with its checkpoint saved: `CollapseStop`, exit code `COLLAPSE_EXIT_CODE`). docs/training.md, "Collapse
monitor".

Why a fixed batch: the measures of successive checks then differ only by the weights. The monitor draws no
random numbers and runs the teacher (always in eval mode) under no_grad, so a run computes the same with it
as without it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from plstitch_eval.errors import PlstitchError
from plstitch_eval.utils.console import logger
from plstitch_train.config import TrainConfig
from plstitch_train.model import PLStitchModel
from plstitch_train.monitors.collapse_probe import collapse_measures

__all__ = [
    "COLLAPSE_EXIT_CODE",
    "CONSECUTIVE",
    "ENTROPY_RATIO_MIN",
    "MIM_LOSS_RATIO_MIN",
    "PROBE_IMAGES",
    "CollapseMonitor",
    "CollapseStop",
]

PROBE_IMAGES = 32  # at most this many teacher global crops of the first batch form the probe batch
# The collapse rule, from the runs measured in docs/training.md ("Collapse monitor"). The tiny-cpu MIM-only
# run from random init (synthetic dataset, the case of issue 47): teacher entropy 0.71 -> 0.96 -> 0.99 x log K
# at steps 10 / 50 / 130, iBOT loss 0.93 -> 0.98 -> 0.997 x 2 log K; both pass 0.98 from step 80 on. A healthy
# run (--init ibot-tiny-synthetic, MIM + L_vid): entropy 0.53 -> 0.79 x log K, loss 0.83-0.93 x 2 log K over
# steps 10-110. Both must hold (a sharp teacher with a uniform-level loss, or the reverse, is not the
# collapse), for CONSECUTIVE checks in a row (one check at the threshold is no alarm).
ENTROPY_RATIO_MIN = 0.98  # teacher entropy / log K
MIM_LOSS_RATIO_MIN = 0.98  # the step's iBOT loss / 2 log K (CLS and patch terms each at log K)
CONSECUTIVE = 2
COLLAPSE_EXIT_CODE = 3  # `plstitch train --stop-on-collapse` after a collapse (checkpoint saved)


class CollapseStop(PlstitchError):
    """A run stopped by `stop_on_collapse` after saving its checkpoint; `message()` is one line for stderr."""

    exit_code = COLLAPSE_EXIT_CODE

    def __init__(self, step: int, checkpoint: str, resume_command: str = "") -> None:
        super().__init__(f"stopped on collapse at step {step}")
        self.step, self.checkpoint, self.resume_command = step, checkpoint, resume_command

    def message(self) -> str:
        return (
            f"teacher collapsed: stopped at step {self.step} (--stop-on-collapse); {self.checkpoint} holds it"
        )


class CollapseMonitor:
    """The collapse measures of `model`'s teacher every `config.run.collapse_every` steps (off when that is 0
    or the run has no iBOT branch, `lambda_mim` = 0)."""

    def __init__(self, model: PLStitchModel, config: TrainConfig) -> None:
        self.model, self.config = model, config
        self.every = config.run.collapse_every
        self.enabled = self.every > 0 and config.loss.lambda_mim > 0 and "ibot_head" in model.teacher
        self.probe: Tensor | None = None
        self.streak = 0  # consecutive checks that looked collapsed
        self.warned = False  # the alarm has rung (and the run warned of it) once: it stays so for the run

    def keep_probe(self, batch: dict[str, Tensor]) -> None:
        """Keep the teacher's global crops of the first batch seen (at most PROBE_IMAGES) on the device."""
        if not self.enabled or self.probe is not None:
            return
        crops = batch["crops"].transpose(0, 1).flatten(0, 1)  # view-major, as the teacher sees them
        device = next(self.model.teacher.parameters()).device
        self.probe = crops[:PROBE_IMAGES].to(device, dtype=torch.float32).clone()

    def due(self, step: int) -> bool:
        """Whether the monitor measures after optimizer step `step` (1-based, as logged)."""
        return self.enabled and self.probe is not None and step % self.every == 0

    @torch.no_grad()
    def measure(self, step: int, mim_loss: float | None = None, epoch: int = 0) -> dict[str, float] | None:
        """The `collapse_*` measures after step `step` (None when not due) at the teacher temperature of
        `epoch`, with `mim_loss`, the step's iBOT loss, against its uniform value 2 log K."""
        if not self.due(step):
            return None
        teacher = self.model.teacher
        was_training = teacher.training
        teacher.eval()
        tokens = teacher["backbone"](self.probe)
        head = teacher["ibot_head"]
        bottleneck = F.normalize(head.mlp(tokens[:, 0]), dim=-1)
        logits = head.last_layer(bottleneck)
        teacher.train(was_training)
        loss = self.model.ibot_loss
        temperature = loss.temperatures(epoch)[0]
        measures = collapse_measures(tokens[:, 0], bottleneck, logits, loss.center, temperature)
        out = {f"collapse_{k}": v for k, v in measures.items()}
        out["collapse_entropy_ratio"] = measures["teacher_entropy"] / measures["uniform_entropy"]
        if mim_loss is not None:
            out["collapse_mim_loss_ratio"] = mim_loss / (2 * measures["uniform_entropy"])
        return out

    @staticmethod
    def collapsed(measures: dict[str, float]) -> bool:
        """Whether one check looks collapsed: a near-uniform teacher and an iBOT loss at its uniform value."""
        loss_ratio = measures.get("collapse_mim_loss_ratio", math.inf)
        return measures["collapse_entropy_ratio"] >= ENTROPY_RATIO_MIN and loss_ratio >= MIM_LOSS_RATIO_MIN

    def update(self, measures: dict[str, float]) -> bool:
        """Count `measures` into the streak; True once CONSECUTIVE checks in a row looked collapsed."""
        self.streak = self.streak + 1 if self.collapsed(measures) else 0
        return self.streak >= CONSECUTIVE

    def warn_once(self, step: int, measures: dict[str, float], announce: bool = True) -> None:
        """The first time the streak rings the alarm: mark the run `warned` and, where `announce` (rank 0),
        log `warning_text`; afterwards nothing (a run warns once, however long it stays collapsed)."""
        if self.warned or self.streak < CONSECUTIVE:
            return
        self.warned = True
        if announce:
            logger.warning(self.warning_text(step, measures))

    def warning_text(self, step: int, measures: dict[str, float]) -> str:
        """One line: the teacher has collapsed, by which measures, and what is known to help."""
        k = math.exp(measures["collapse_uniform_entropy"])
        loss = measures.get("collapse_mim_loss_ratio")
        loss_text = "" if loss is None else f", iBOT loss {loss:.3f} x 2 log K"
        return (
            f"iBOT teacher collapsed at step {step} ({CONSECUTIVE} checks in a row): teacher entropy "
            f"{measures['collapse_entropy_ratio']:.3f} x log K (K={k:.0f}){loss_text}, CLS cosine across "
            f"images {measures['collapse_cls_pairwise_cosine']:.3f}, bottleneck cosine "
            f"{measures['collapse_bottleneck_pairwise_cosine']:.3f}, logit spread "
            f"{measures['collapse_logit_spread']:.2g}. Known to help: a lower teacher temperature "
            "(--set teacher_temp=0.02), Sinkhorn-Knopp centring (--set centering=sinkhorn_knopp), a MIM "
            "initialisation (--init ibot-tiny-synthetic); docs/reproduce.md."
        )
