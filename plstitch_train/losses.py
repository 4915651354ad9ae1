"""Ranking losses (Plackett-Luce, pairwise hinge, permutation classification) and the iBOT loss.

Conventions shared by the ranking losses: `scores[b, j]` is the score of item `j` of list `b` (a higher score
ranks earlier); `order[b, i]` is the index of the item that truly comes i-th (default `0..K-1`);
`mask[b, j]` (bool) marks the valid items of padded lists - masked items are dropped, so a padded list scores
exactly like the unpadded one.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

from plstitch_eval.errors import ConfigError

__all__ = [
    "MAX_PERMUTATION_CLIP_LEN",
    "IBOTLoss",
    "all_permutations",
    "apply_permutation",
    "pairwise_ranking_loss",
    "permutation_classification_loss",
    "permutation_logits_from_scores",
    "plackett_luce_loss",
    "sample_permutation_indices",
    "teacher_temperature_schedule",
]

REDUCTIONS = ("mean", "sum", "none", "mean_items")
MAX_PERMUTATION_CLIP_LEN = 8  # 8! = 40320 classes; 9! = 362880 is too many for a classifier


def _check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ConfigError(f"unknown reduction {reduction!r}; use one of {', '.join(REDUCTIONS)}")


def _ranked(scores: Tensor, order: Tensor | None, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """Return (scores in true rank order [B,K], validity of each rank position [B,K] bool)."""
    if scores.dim() != 2:
        raise ConfigError(f"scores must be [B, K], got shape {tuple(scores.shape)}")
    if mask is None:
        valid = torch.ones_like(scores, dtype=torch.bool)
    else:
        if mask.shape != scores.shape:
            raise ConfigError(f"mask shape {tuple(mask.shape)} must equal scores shape {tuple(scores.shape)}")
        valid = mask.to(device=scores.device, dtype=torch.bool)
    if order is None:
        return scores, valid
    if order.shape != scores.shape:
        raise ConfigError(f"order shape {tuple(order.shape)} must equal scores shape {tuple(scores.shape)}")
    order = order.to(device=scores.device, dtype=torch.long)
    return scores.gather(1, order), valid.gather(1, order)


def _reduce(per_list: Tensor, reduction: str, n_items: Tensor) -> Tensor:
    if reduction == "none":
        return per_list
    if reduction == "sum":
        return per_list.sum()
    if reduction == "mean":
        return per_list.mean()
    return per_list.sum() / n_items.sum().clamp(min=1)  # mean_items


def plackett_luce_loss(
    scores: Tensor, order: Tensor | None = None, mask: Tensor | None = None, reduction: str = "mean"
) -> Tensor:
    """Plackett-Luce negative log-likelihood of the true order given the scores.

    Per list: `sum_i [logsumexp(s_r(i), ..., s_r(K)) - s_r(i)]` (paper Eq. 1), computed stably as a reversed
    `logcumsumexp` over the scores gathered in true order. `reduction`: "sum" over lists, "mean" over lists,
    "none" ([B]), or "mean_items" = total / number of valid items (the authors' code divides by B*K).
    """
    _check_reduction(reduction)
    ranked, valid = _ranked(scores, order, mask)
    compute_dtype = torch.float32 if ranked.dtype in (torch.float16, torch.bfloat16) else ranked.dtype
    ranked = ranked.to(compute_dtype)
    # Masked items get a huge finite negative score: exp() of it is exactly 0 in every suffix sum, and unlike
    # -inf it keeps the backward pass free of NaNs.
    very_negative = torch.finfo(compute_dtype).min / 4
    ranked = torch.where(valid, ranked, torch.full_like(ranked, very_negative))
    suffix_lse = torch.logcumsumexp(ranked.flip(1), dim=1).flip(1)
    terms = torch.where(valid, suffix_lse - ranked, torch.zeros_like(ranked))
    return _reduce(terms.sum(1), reduction, valid.sum(1))


def pairwise_ranking_loss(
    scores: Tensor,
    order: Tensor | None = None,
    mask: Tensor | None = None,
    margin: float = 1.0,
    reduction: str = "mean",
) -> Tensor:
    """Pairwise hinge over all ordered pairs i < j of the true order: `max(0, margin - (s_r(i) - s_r(j)))`.

    Averaged over the valid pairs of each list, then reduced over lists ("mean_items" = total over all pairs /
    number of valid pairs).
    """
    _check_reduction(reduction)
    ranked, valid = _ranked(scores, order, mask)
    diff = ranked.unsqueeze(2) - ranked.unsqueeze(1)  # [B, K, K]: s_r(i) - s_r(j)
    k = ranked.shape[1]
    upper = torch.ones(k, k, dtype=torch.bool, device=ranked.device).triu(1)
    pair_valid = upper & valid.unsqueeze(2) & valid.unsqueeze(1)
    hinge = torch.where(pair_valid, torch.clamp(margin - diff, min=0), torch.zeros_like(diff))
    n_pairs = pair_valid.sum((1, 2))
    if reduction == "mean_items":
        return hinge.sum() / n_pairs.sum().clamp(min=1)
    per_list = hinge.sum((1, 2)) / n_pairs.clamp(min=1)
    return _reduce(per_list, reduction, n_pairs)


# --- permutation classification (Shuffle & Learn style baseline) ---


def _check_clip_len(k: int) -> None:
    if not 1 <= k <= MAX_PERMUTATION_CLIP_LEN:
        raise ConfigError(
            f"permutation classification needs 1 <= clip_len <= {MAX_PERMUTATION_CLIP_LEN} "
            f"(got {k}: {math.factorial(k) if k > 0 else 0} classes); "
            "use --objective pl or pairwise for longer clips"
        )


@lru_cache(maxsize=16)
def _permutation_table(k: int) -> Tensor:
    return torch.tensor(list(itertools.permutations(range(k))), dtype=torch.long).reshape(-1, k)


def all_permutations(k: int) -> Tensor:
    """All k! permutations of `0..k-1` in lexicographic order, [k!, k] int64; row p is class p."""
    _check_clip_len(k)
    return _permutation_table(k).clone()


def sample_permutation_indices(
    batch_size: int, k: int, generator: torch.Generator | None = None, device: torch.device | str = "cpu"
) -> Tensor:
    """Draw one permutation class per clip uniformly from the k! classes, [B] int64."""
    _check_clip_len(k)
    return torch.randint(math.factorial(k), (batch_size,), generator=generator).to(device)


def apply_permutation(frames: Tensor, perm_index: Tensor) -> Tensor:
    """Shuffle each clip by its permutation class: `out[b, i] = frames[b, perms[perm_index[b], i]]`.

    `frames` is [B, k, ...]; the classifier then predicts `perm_index` from `out`.
    """
    k = frames.shape[1]
    perms = all_permutations(k).to(frames.device)[perm_index.to(frames.device)]  # [B, k]
    index = perms.reshape(*perms.shape, *([1] * (frames.dim() - 2))).expand_as(frames)
    return frames.gather(1, index)


def permutation_logits_from_scores(scores: Tensor) -> Tensor:
    """Per-frame scores of a shuffled clip [B, k] -> logits over the k! shuffles [B, k!].

    Logit of class p = log P_PL(true order | s) if the clip was shuffled by permutation p
    (`apply_permutation`), i.e. the Plackett-Luce log-likelihood of the order `argsort(perms[p])`; the
    logits are normalised, so the cross-entropy on them equals the PL loss of the applied shuffle.
    """
    batch, k = scores.shape
    perms = all_permutations(k).to(scores.device)
    true_orders = perms.argsort(dim=1)  # item at position i is frame perms[p, i]
    expanded = scores.unsqueeze(1).expand(batch, len(perms), k).reshape(-1, k)
    orders = true_orders.unsqueeze(0).expand(batch, -1, -1).reshape(-1, k)
    return -plackett_luce_loss(expanded, order=orders, reduction="none").view(batch, len(perms))


def permutation_classification_loss(
    logits: Tensor, target_perm_index: Tensor, reduction: str = "mean"
) -> Tensor:
    """Cross-entropy over the k! permutation classes; `logits` [B, k!], `target_perm_index` [B] int64."""
    if reduction not in ("mean", "sum", "none"):
        raise ConfigError(f"unknown reduction {reduction!r}; use mean, sum or none")
    n_classes = logits.shape[-1]
    if math.factorial(_inverse_factorial(n_classes)) != n_classes:
        raise ConfigError(f"permutation logits must have k! classes, got {n_classes}")
    return F.cross_entropy(_upcast(logits), target_perm_index.to(logits.device).long(), reduction=reduction)


def _inverse_factorial(n: int) -> int:
    k = 1
    while math.factorial(k) < n:
        k += 1
    return k


# --- iBOT loss ---


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
    ) -> None:
        super().__init__()
        if n_global_crops < 1:
            raise ConfigError(f"n_global_crops must be >= 1, got {n_global_crops}")
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
        t_cls = F.softmax((_upcast(teacher_cls) - self.center) / temp, dim=-1).detach().chunk(n_views)
        t_patch = (
            F.softmax((_upcast(teacher_patch) - self.center2) / temp_patch, dim=-1).detach().chunk(n_views)
        )
        masks = student_masks.flatten(1).to(student_patch.device).float().chunk(n_views)
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
        if update_center:
            self.update_center(teacher_cls, teacher_patch)
        return {"cls": cls_loss, "patch": patch_loss, "total": cls_loss + patch_loss}

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
