"""PL-Stitch model: student/teacher ViT (teacher = EMA of student) and the branches L_vid, L_MIM, L_jigsaw.

`PLStitchModel.forward(batch, epoch, jigsaw_weight)` returns the weighted total and each branch's loss;
a branch whose weight is 0 is skipped entirely (no forward, no parameters in the graph).
"""

from __future__ import annotations

import copy
from typing import Any

import timm
import torch
from timm.models.vision_transformer import VisionTransformer
from torch import Tensor, nn

from plstitch_eval.errors import ConfigError
from plstitch_train.heads import IBOTHead, JigsawHead, PermutationHead, TemporalHead
from plstitch_train.losses import (
    IBOTLoss,
    apply_permutation,
    pairwise_ranking_loss,
    permutation_classification_loss,
    plackett_luce_loss,
    sample_permutation_indices,
)
from plstitch_train.presets import TrainConfig


def pl_loss_per_item(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """PL NLL of the default order divided by each list's length, averaged over lists.

    Equals the authors' sum / (B*K) when every list has K items, and stays a plain mean over samples for
    padded lists, so gradient accumulation and DDP shards add up exactly to the full batch.
    """
    per_list = plackett_luce_loss(scores, mask=mask, reduction="none")
    lengths = scores.new_full((scores.shape[0],), scores.shape[1]) if mask is None else mask.sum(1)
    return (per_list / lengths.clamp(min=1)).mean()


class ViTBackbone(nn.Module):
    """A timm ViT plus iBOT's `masked_embed` token; returns all tokens [B, 1+N, D] after the final norm."""

    def __init__(self, vit: VisionTransformer) -> None:
        super().__init__()
        if not isinstance(vit, VisionTransformer) or vit.cls_token is None or vit.num_reg_tokens:
            raise ConfigError(
                "PL-Stitch needs a timm VisionTransformer with a CLS token and no register tokens."
            )
        self.vit = vit
        self.masked_embed = nn.Parameter(torch.zeros(1, vit.embed_dim))

    @property
    def grid_size(self) -> tuple[int, int]:
        """Patch grid (h, w)."""
        return tuple(self.vit.patch_embed.grid_size)

    def forward(self, images: Tensor, masks: Tensor | None = None, pos_embed: bool = True) -> Tensor:
        """Tokens of `images`; `masks` [B, h, w] (True = use masked_embed); `pos_embed=False` adds no PE."""
        vit = self.vit
        x = vit.patch_embed(images)
        if masks is not None:
            x = torch.where(masks.flatten(1).unsqueeze(-1), self.masked_embed.to(x.dtype), x)
        if pos_embed:
            x = vit._pos_embed(x)
        else:
            x = torch.cat([vit.cls_token.expand(x.shape[0], -1, -1).to(x.dtype), x], dim=1)
        x = vit.norm_pre(vit.patch_drop(x))
        return vit.norm(vit.blocks(x))


def build_vit(config: TrainConfig, drop_path: float) -> VisionTransformer:
    """timm ViT of `config.arch` + `config.model_args` at `config.img_size`, no classifier."""
    try:
        vit = timm.create_model(
            config.arch,
            pretrained=False,
            num_classes=0,
            img_size=config.img_size,
            drop_path_rate=drop_path,
            **config.model_args,
        )
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ConfigError(f"Cannot build backbone {config.arch!r} with {config.model_args}: {exc}") from exc
    if not isinstance(vit, VisionTransformer):
        raise ConfigError(f"arch {config.arch!r} is not a timm VisionTransformer; PL-Stitch trains ViTs.")
    return vit


def init_from_encoder(vit: VisionTransformer, spec: str) -> None:
    """Fill `vit` strictly from encoder `spec` (registry name, hf-hub:, folder, run dir or checkpoint)."""
    from plstitch_eval.hub import load_encoder
    from plstitch_eval.hub.convert import load_strict

    encoder = load_encoder(spec, device="cpu")
    load_strict(vit, encoder.model.state_dict(), source=f"--init {spec}")


def jigsaw_queries(tokens: Tensor, masks: Tensor) -> tuple[Tensor, Tensor]:
    """Masked patch tokens in raster order, padded: tokens [B,N,D], masks [B,N] -> ([B,M,D], valid [B,M])."""
    masks = masks.flatten(1).bool()
    counts = masks.sum(1)
    longest = max(int(counts.max()), 1)
    order = torch.argsort((~masks).to(torch.int8), dim=1, stable=True)[
        :, :longest
    ]  # masked first, raster order
    queries = tokens.gather(1, order.unsqueeze(-1).expand(-1, -1, tokens.shape[-1]))
    valid = torch.arange(longest, device=tokens.device).unsqueeze(0) < counts.unsqueeze(1)
    return queries, valid


class PLStitchModel(nn.Module):
    """Student (backbone + heads, trained) and teacher (backbone + iBOT head, EMA of the student)."""

    def __init__(self, config: TrainConfig) -> None:
        super().__init__()
        self.config = config
        student_vit = build_vit(config, config.drop_path)
        if config.init:
            init_from_encoder(student_vit, config.init)
        dim = student_vit.embed_dim
        self.student = nn.ModuleDict({"backbone": ViTBackbone(student_vit)})
        if config.lambda_mim > 0:
            self.student["ibot_head"] = IBOTHead(
                dim,
                config.ibot_out_dim,
                config.ibot_out_dim,
                config.ibot_hidden_dim,
                config.ibot_bottleneck_dim,
            )
            self.ibot_loss = IBOTLoss(
                config.ibot_out_dim,
                config.ibot_out_dim,
                n_global_crops=2,
                student_temp=config.student_temp,
                teacher_temp=config.teacher_temp,
                warmup_teacher_temp=config.warmup_teacher_temp,
                teacher_patch_temp=config.teacher_patch_temp,
                warmup_teacher_patch_temp=config.warmup_teacher_patch_temp,
                warmup_epochs=config.warmup_teacher_temp_epochs,
                n_epochs=config.epochs,
            )
        else:
            self.student["backbone"].masked_embed.requires_grad_(False)
        if config.lambda_vid > 0:
            if config.objective == "permutation":
                self.student["permutation_head"] = PermutationHead(dim, config.clip_len)
            else:
                self.student["temporal_head"] = TemporalHead(
                    dim,
                    config.temporal_dim,
                    config.temporal_layers,
                    config.temporal_heads,
                    config.temporal_ff,
                    config.temporal_dropout,
                )
        if config.lambda_jigsaw > 0:
            self.student["jigsaw_head"] = JigsawHead(dim, config.jigsaw_heads or None)
        self.teacher = nn.ModuleDict()
        teacher_vit = build_vit(config, 0.0)
        teacher_vit.load_state_dict(student_vit.state_dict())
        self.teacher["backbone"] = ViTBackbone(teacher_vit)
        self.teacher["backbone"].load_state_dict(self.student["backbone"].state_dict())
        if "ibot_head" in self.student:
            self.teacher["ibot_head"] = copy.deepcopy(self.student["ibot_head"])
        self.teacher.requires_grad_(False)

    def train(self, mode: bool = True) -> PLStitchModel:
        """Train the student; the teacher always runs in eval mode (no dropout, like DINO's teacher)."""
        super().train(mode)
        self.teacher.eval()
        return self

    def forward(
        self, batch: dict[str, Tensor], epoch: int = 0, jigsaw_weight: float | None = None
    ) -> dict[str, Tensor]:
        """Losses of one batch: `loss` (weighted sum) and the unweighted `vid`, `mim`, `jigsaw` that ran."""
        config = self.config
        jigsaw_weight = config.lambda_jigsaw if jigsaw_weight is None else jigsaw_weight
        out: dict[str, Tensor] = {}
        total = None
        terms = []
        if config.lambda_vid > 0:
            out["vid"] = self.video_loss(batch["clip"])
            terms.append(config.lambda_vid * out["vid"])
        if config.lambda_mim > 0:
            out["mim"] = self.mim_loss(batch["crops"], batch["masks"][:, :2], epoch)
            terms.append(config.lambda_mim * out["mim"])
        if jigsaw_weight > 0 and config.lambda_jigsaw > 0:
            out["jigsaw"] = self.jigsaw_loss(batch["context"], batch["masks"][:, 2])
            terms.append(jigsaw_weight * out["jigsaw"])
        for term in terms:
            total = term if total is None else total + term
        out["loss"] = total
        return out

    def video_loss(self, clip: Tensor) -> Tensor:
        """L_vid on clips [B, k, 3, H, W] in true order: CLS (PE on, with grad) -> head -> ranking loss."""
        batch, k = clip.shape[:2]
        perm_index = None
        if self.config.objective == "permutation":
            perm_index = sample_permutation_indices(batch, k, device=clip.device)
            clip = apply_permutation(clip, perm_index)
        feats = self.student["backbone"](clip.flatten(0, 1))[:, 0].reshape(batch, k, -1)
        if perm_index is not None:
            return permutation_classification_loss(self.student["permutation_head"](feats), perm_index)
        scores = self.student["temporal_head"](feats)
        if self.config.objective == "pairwise":
            return pairwise_ranking_loss(scores)
        return pl_loss_per_item(scores)

    def mim_loss(self, crops: Tensor, masks: Tensor, epoch: int) -> Tensor:
        """iBOT on two global crops [B, 2, 3, H, W] with block masks [B, 2, h, w] (view-major inside)."""
        crops = crops.transpose(0, 1).flatten(0, 1)
        masks = masks.transpose(0, 1).flatten(0, 1)
        with torch.no_grad():
            teacher_cls, teacher_patch = self.teacher["ibot_head"](self.teacher["backbone"](crops))
        student_cls, student_patch = self.student["ibot_head"](self.student["backbone"](crops, masks=masks))
        losses = self.ibot_loss(
            student_cls,
            student_patch,
            teacher_cls,
            teacher_patch,
            masks,
            epoch=epoch,
            update_center=self.training,
        )
        return losses["total"]

    def jigsaw_loss(self, context: Tensor, masks: Tensor) -> Tensor:
        """L_jigsaw: masked current-frame patches (no PE) ranked in raster order vs context patches.

        `context` is [B, 3, 3, H, W] = (past, current, future); past and future are encoded without gradient.
        """
        batch = context.shape[0]
        backbone = self.student["backbone"]
        current = backbone(context[:, 1], pos_embed=False)[:, 1:]
        with torch.no_grad():
            keys = backbone(context[:, 0::2].flatten(0, 1), pos_embed=False)[:, 1:]
            keys = keys.reshape(batch, -1, keys.shape[-1])
        queries, valid = jigsaw_queries(current, masks)
        scores = self.student["jigsaw_head"](queries, keys, query_mask=valid)
        return pl_loss_per_item(scores, valid)

    @torch.no_grad()
    def update_teacher(self, momentum: float) -> None:
        """teacher = momentum * teacher + (1 - momentum) * student, parameter by parameter."""
        student = dict(self.student.named_parameters())
        for name, teacher_param in self.teacher.named_parameters():
            teacher_param.mul_(momentum).add_(student[name].detach(), alpha=1 - momentum)

    def param_groups(self) -> list[dict[str, Any]]:
        """AdamW groups: weight decay on matrices, none on biases and norm/1-d parameters (DINO's rule)."""
        decay, no_decay = [], []
        for name, param in self.student.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if name.endswith(".bias") or param.ndim <= 1 else decay).append(param)
        return [{"params": decay, "apply_wd": True}, {"params": no_decay, "apply_wd": False}]

    def last_layer_parameters(self) -> list[nn.Parameter]:
        """iBOT head last-layer parameters (frozen during the first epoch(s))."""
        return self.student["ibot_head"].last_layer_parameters() if "ibot_head" in self.student else []
