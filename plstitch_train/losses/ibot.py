"""iBOT loss (masked image modeling branch L_MIM) and its teacher temperature schedule."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from plstitch_eval.errors import ConfigError
from plstitch_train.losses.sinkhorn import CENTERINGS, sinkhorn_knopp

if TYPE_CHECKING:
    from plstitch_train.config import LossConfig

__all__ = ["IBOTLoss", "teacher_temperature_schedule"]


def _upcast(x: Tensor) -> Tensor:
    """Half/bfloat16 -> float32 for softmax and centring; float32/64 unchanged."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def teacher_temperature_schedule(
    warmup_temp: float, temp: float, warmup_epochs: int, n_epochs: int
) -> Tensor:
    """Per-epoch teacher temperature: linear `warmup_temp` -> `temp` over `warmup_epochs`, then constant."""
    n_epochs = max(int(n_epochs), 1)
    warmup_epochs = min(max(int(warmup_epochs), 0), n_epochs)
    warm = torch.linspace(warmup_temp, temp, warmup_epochs, dtype=torch.float64)
    rest = torch.full((n_epochs - warmup_epochs,), float(temp), dtype=torch.float64)
    return torch.cat([warm, rest])


class IBOTLoss(nn.Module):
    """iBOT objective: CLS distillation over cross-view pairs + masked-patch distillation on the same view.

    CLS: for teacher view a and student view b != a, `sum(-softmax((t_a - c)/T_t) * log_softmax(s_b/T_s))`,
    averaged over images and pairs. Patch: for the same view, the same cross-entropy per patch, summed over
    masked patches / number of masked patches per image, then averaged over images and views. Centres `c`
    (CLS) and `c2` (patch) follow an EMA of the teacher outputs (all-reduced under torch.distributed).
    Zhou et al., iBOT, ICLR 2022.
    """

    def __init__(
        self,
        out_dim: int,
        patch_out_dim: int,
        n_global_crops: int = 2,
        student_temp: float = 0.1,
        teacher_temp: float = 0.04,
        warmup_teacher_temp: float = 0.04,
        teacher_patch_temp: float = 0.07,
        warmup_teacher_patch_temp: float = 0.04,
        warmup_epochs: int = 30,
        n_epochs: int = 100,
        center_momentum: float = 0.9,
        center_momentum2: float = 0.9,
        lambda1: float = 1.0,
        lambda2: float = 1.0,
        centering: str = "center",
    ) -> None:
        super().__init__()
        if n_global_crops < 1:
            raise ConfigError(f"n_global_crops must be >= 1, got {n_global_crops}")
        if centering not in CENTERINGS:
            raise ConfigError(f"centering {centering!r} unknown; use one of {', '.join(CENTERINGS)}.")
        self.centering = centering
        self.n_global_crops = n_global_crops
        self.student_temp = student_temp
        self.center_momentum = center_momentum
        self.center_momentum2 = center_momentum2
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.register_buffer("center", torch.zeros(1, out_dim))
        self.register_buffer("center2", torch.zeros(1, 1, patch_out_dim))
        self.register_buffer(
            "teacher_temp_schedule",
            teacher_temperature_schedule(warmup_teacher_temp, teacher_temp, warmup_epochs, n_epochs),
            persistent=False,
        )
        self.register_buffer(
            "teacher_patch_temp_schedule",
            teacher_temperature_schedule(
                warmup_teacher_patch_temp, teacher_patch_temp, warmup_epochs, n_epochs
            ),
            persistent=False,
        )

    @classmethod
    def from_settings(
        cls, loss: LossConfig, out_dim: int, n_epochs: int, n_global_crops: int = 2
    ) -> IBOTLoss:
        """The iBOT loss of a run's `loss` section (temperatures and their warm-up) over `n_epochs` epochs,
        for iBOT heads of `out_dim` outputs (CLS and patch alike)."""
        return cls(
            out_dim,
            out_dim,
            n_global_crops=n_global_crops,
            student_temp=loss.student_temp,
            teacher_temp=loss.teacher_temp,
            warmup_teacher_temp=loss.warmup_teacher_temp,
            teacher_patch_temp=loss.teacher_patch_temp,
            warmup_teacher_patch_temp=loss.warmup_teacher_patch_temp,
            warmup_epochs=loss.warmup_teacher_temp_epochs,
            n_epochs=n_epochs,
            centering=loss.centering,
        )

    def temperatures(self, epoch: int) -> tuple[float, float]:
        """(teacher CLS temperature, teacher patch temperature) at `epoch` (clamped to the last epoch)."""
        i = min(max(int(epoch), 0), len(self.teacher_temp_schedule) - 1)
        return float(self.teacher_temp_schedule[i]), float(self.teacher_patch_temp_schedule[i])

    def forward(
        self,
        student_cls: Tensor,
        student_patch: Tensor,
        teacher_cls: Tensor,
        teacher_patch: Tensor,
        student_masks: Tensor,
        epoch: int,
        update_center: bool = True,
        student_local_cls: Tensor | None = None,
    ) -> dict[str, Tensor]:
        """Loss for views stacked view-major: cls [V*B, C], patch [V*B, N, P], masks [V*B, N] or [V*B, H, W].

        `student_local_cls` ([L*B, C], optional; PL-Stitch uses none) adds CLS terms teacher -> local crop.
        Returns `{"cls": lambda1 * L_cls, "patch": lambda2 * L_patch, "total": their sum}`.
        """
        n_views = self.n_global_crops
        rows = teacher_cls.shape[0]
        if (
            rows % n_views
            or student_cls.shape[0] != rows
            or student_patch.shape[:2] != teacher_patch.shape[:2]
        ):
            raise ConfigError(
                f"IBOTLoss: expected {n_views} global views stacked view-major with matching student/teacher "
                f"rows; got student cls {tuple(student_cls.shape)}, teacher cls {tuple(teacher_cls.shape)}, "
                f"student patch {tuple(student_patch.shape)}, teacher patch {tuple(teacher_patch.shape)}"
            )
        if student_masks.shape[0] != rows or student_masks[0].numel() != student_patch.shape[1]:
            raise ConfigError(
                f"IBOTLoss: masks {tuple(student_masks.shape)} do not match {rows} images of "
                f"{student_patch.shape[1]} patches"
            )
        temp, temp_patch = self.temperatures(epoch)
        s_cls = (_upcast(student_cls) / self.student_temp).chunk(n_views)
        s_patch = (_upcast(student_patch) / self.student_temp).chunk(n_views)
        flat_masks = student_masks.flatten(1).to(student_patch.device)
        t_cls, t_patch = self.teacher_targets(teacher_cls, teacher_patch, flat_masks, temp, temp_patch)
        t_cls, t_patch = t_cls.chunk(n_views), t_patch.chunk(n_views)
        masks = flat_masks.float().chunk(n_views)
        if student_local_cls is not None:
            s_cls = s_cls + (_upcast(student_local_cls) / self.student_temp).chunk(
                student_local_cls.shape[0] // (rows // n_views)
            )

        cls_total = patch_total = torch.zeros((), dtype=s_cls[0].dtype, device=student_cls.device)
        n_cls_terms = n_patch_terms = 0
        for a in range(n_views):
            for b in range(len(s_cls)):
                if a == b:
                    per_patch = torch.sum(-t_patch[a] * F.log_softmax(s_patch[b], dim=-1), dim=-1)
                    per_image = (per_patch * masks[b]).sum(-1) / masks[b].sum(-1).clamp(min=1.0)
                    patch_total = patch_total + per_image.mean()
                    n_patch_terms += 1
                else:
                    per_image = torch.sum(-t_cls[a] * F.log_softmax(s_cls[b], dim=-1), dim=-1)
                    cls_total = cls_total + per_image.mean()
                    n_cls_terms += 1
        cls_loss = cls_total / max(n_cls_terms, 1) * self.lambda1
        patch_loss = patch_total / max(n_patch_terms, 1) * self.lambda2
        if update_center and self.centering == "center":
            self.update_center(teacher_cls, teacher_patch)
        return {"cls": cls_loss, "patch": patch_loss, "total": cls_loss + patch_loss}

    @torch.no_grad()
    def teacher_targets(
        self, teacher_cls: Tensor, teacher_patch: Tensor, masks: Tensor, temp: float, temp_patch: float
    ) -> tuple[Tensor, Tensor]:
        """Teacher distributions (CLS [V*B, C], patch [V*B, N, P]): softmax of the centred outputs (iBOT), or
        Sinkhorn-Knopp over the batch's CLS outputs and over its masked patches only (DINOv2; the others are
        never scored and stay 0). `masks` [V*B, N] bool."""
        if self.centering == "center":
            t_cls = F.softmax((_upcast(teacher_cls) - self.center) / temp, dim=-1)
            t_patch = F.softmax((_upcast(teacher_patch) - self.center2) / temp_patch, dim=-1)
            return t_cls, t_patch
        t_cls = sinkhorn_knopp(teacher_cls, temp)
        t_patch = torch.zeros(teacher_patch.shape, dtype=t_cls.dtype, device=teacher_patch.device)
        selected = masks.bool()
        t_patch[selected] = sinkhorn_knopp(teacher_patch[selected], temp_patch)
        return t_cls, t_patch

    @torch.no_grad()
    def update_center(self, teacher_cls: Tensor, teacher_patch: Tensor) -> None:
        """EMA of the teacher's mean CLS output and mean (over patches, then images) patch output."""
        world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        cls_sum = _upcast(teacher_cls).sum(0, keepdim=True)
        patch_sum = _upcast(teacher_patch).mean(1).sum(0, keepdim=True).unsqueeze(1)
        if world > 1:
            dist.all_reduce(cls_sum)
            dist.all_reduce(patch_sum)
        cls_mean = cls_sum / (teacher_cls.shape[0] * world)
        patch_mean = patch_sum / (teacher_patch.shape[0] * world)
        self.center.mul_(self.center_momentum).add_(cls_mean * (1 - self.center_momentum))
        self.center2.mul_(self.center_momentum2).add_(patch_mean * (1 - self.center_momentum2))
