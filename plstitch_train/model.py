"""PL-Stitch model: student/teacher ViT (teacher = EMA of student) and the branches L_vid, L_MIM, L_jigsaw.

`PLStitchModel.forward(batch, epoch, jigsaw_weight)` returns the weighted total and each branch's loss;
a branch whose weight is 0 is skipped entirely (no forward, no parameters in the graph). Module names mirror
the authors' checkpoints (student: backbone + iBOT head with separate CLS/patch last layers, temporal head,
jigsaw head; teacher: backbone + iBOT head with one shared last layer), see `plstitch_train.init`.
"""

from __future__ import annotations

from typing import Any

import timm
import torch
from timm.layers import resample_abs_pos_embed
from timm.models.vision_transformer import VisionTransformer
from torch import Tensor, nn
from torch.profiler import record_function

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.convert import load_strict
from plstitch_train.config import ModelConfig, TrainConfig, branch, branch_weights
from plstitch_train.heads import IBOTHead, JigsawHead, temporal_head_size
from plstitch_train.init import initialise
from plstitch_train.losses import IBOTLoss, get_objective, pl_loss_per_item

__all__ = [
    "PLStitchModel",
    "ViTBackbone",
    "build_vit",
    "init_from_encoder",
    "pl_loss_per_item",
    "temporal_head_size",
]


class ViTBackbone(nn.Module):
    """A timm ViT plus iBOT's `masked_embed` token; returns all tokens [B, 1+N, D] after the final norm.

    The teacher never sees masks, so it is built with `masked_embed=False` (as the authors' teacher).
    """

    def __init__(self, vit: VisionTransformer, masked_embed: bool = True) -> None:
        super().__init__()
        if not isinstance(vit, VisionTransformer) or vit.cls_token is None or vit.num_reg_tokens:
            raise ConfigError(
                "PL-Stitch needs a timm VisionTransformer with a CLS token and no register tokens."
            )
        self.vit = vit
        if masked_embed:
            self.masked_embed = nn.Parameter(torch.zeros(1, vit.embed_dim))
        else:
            self.register_parameter("masked_embed", None)

    @property
    def grid_size(self) -> tuple[int, int]:
        """Patch grid (h, w)."""
        return tuple(self.vit.patch_embed.grid_size)

    def forward(self, images: Tensor, masks: Tensor | None = None, pos_embed: bool = True) -> Tensor:
        """Tokens of `images`; `masks` [B, h, w] (True = use masked_embed); `pos_embed=False` adds no PE.

        Images off the native size (iBOT local crops) get the position embedding resampled to their patch grid
        (bicubic, as iBOT's `interpolate_pos_encoding`); their patches must tile them exactly.
        """
        vit = self.vit
        patch = vit.patch_embed.patch_size
        grid = (images.shape[-2] // patch[0], images.shape[-1] // patch[1])
        native = grid == self.grid_size
        if native:
            x = vit.patch_embed(images)
        elif images.shape[-2:] != (grid[0] * patch[0], grid[1] * patch[1]):
            raise ConfigError(
                f"Image size {tuple(images.shape[-2:])} is not a whole number of {tuple(patch)} patches."
            )
        else:
            x = vit.patch_embed.norm(vit.patch_embed.proj(images).flatten(2).transpose(1, 2))
        if masks is not None:
            if self.masked_embed is None:
                raise ConfigError("This backbone has no masked_embed (a teacher); it cannot take masks.")
            x = torch.where(masks.flatten(1).unsqueeze(-1), self.masked_embed.to(x.dtype), x)
        if pos_embed and native:
            x = vit._pos_embed(x)
        else:
            x = torch.cat([vit.cls_token.expand(x.shape[0], -1, -1).to(x.dtype), x], dim=1)
            if pos_embed:
                resampled = resample_abs_pos_embed(vit.pos_embed, list(grid), num_prefix_tokens=1)
                x = vit.pos_drop(x + resampled.to(x.dtype))
        x = vit.norm_pre(vit.patch_drop(x))
        return vit.norm(vit.blocks(x))


def build_vit(model: ModelConfig, drop_path: float) -> VisionTransformer:
    """timm ViT of `model.arch` + `model.model_args` at `model.img_size`, no classifier (a run's `model`
    section; a whole TrainConfig works too, through its flat names)."""
    try:
        vit = timm.create_model(
            model.arch,
            pretrained=False,
            num_classes=0,
            img_size=model.img_size,
            drop_path_rate=drop_path,
            **model.model_args,
        )
    except (RuntimeError, TypeError, ValueError) as exc:
        raise ConfigError(f"Cannot build backbone {model.arch!r} with {model.model_args}: {exc}") from exc
    if not isinstance(vit, VisionTransformer):
        raise ConfigError(f"arch {model.arch!r} is not a timm VisionTransformer; PL-Stitch trains ViTs.")
    return vit


def init_from_encoder(vit: VisionTransformer, spec: str) -> None:
    """Fill `vit` strictly from encoder `spec` (registry name, hf-hub:, folder, run dir or checkpoint)."""
    encoder = load_encoder(spec, device="cpu")
    load_strict(vit, encoder.model.state_dict(), source=f"--init {spec}")


class PLStitchModel(nn.Module):
    """Student (backbone + heads, trained) and teacher (backbone + iBOT head, EMA of the student).

    The student's iBOT head has separate CLS and patch last layers (`last_layer`, `last_layer2`), the
    teacher's one shared last layer (authors' `shared_head=False` / `shared_head_teacher=True`); the teacher
    starts as the student's copy wherever their parameter names coincide. With `model.init` the weights then
    come from a checkpoint (`plstitch_train.init.initialise`).
    """

    def __init__(self, config: TrainConfig) -> None:
        super().__init__()
        self.config = config
        model, loss = config.model, config.loss
        student_vit = build_vit(model, model.drop_path)
        dim = student_vit.embed_dim
        self.student = nn.ModuleDict({"backbone": ViTBackbone(student_vit)})
        self.teacher = nn.ModuleDict({"backbone": ViTBackbone(build_vit(model, 0.0), masked_embed=False)})
        if loss.lambda_mim > 0:
            sizes = {
                "in_dim": dim,
                "out_dim": model.ibot_out_dim,
                "patch_out_dim": model.ibot_out_dim,
                "hidden_dim": model.ibot_hidden_dim,
                "bottleneck_dim": model.ibot_bottleneck_dim,
            }
            self.student["ibot_head"] = IBOTHead(**sizes, shared_head=False)
            self.teacher["ibot_head"] = IBOTHead(**sizes, shared_head=True)
            self.ibot_loss = IBOTLoss.from_settings(loss, model.ibot_out_dim, config.optim.epochs)
        if loss.lambda_mim == 0 and loss.lambda_jigsaw == 0:
            self.student["backbone"].masked_embed.requires_grad_(False)  # no branch sees masks
        if loss.lambda_vid > 0:  # the objective named by `loss.objective` brings its own head
            self.objective = get_objective(loss.objective)(config)
            self.student[self.objective.head_name] = self.objective.build_head(dim)
        if loss.lambda_jigsaw > 0:
            self.student["jigsaw_head"] = JigsawHead(dim, model.jigsaw_heads or None)
        self.copy_student_to_teacher()
        self.teacher.requires_grad_(False)
        if model.init:
            initialise(self, model.init)

    @torch.no_grad()
    def copy_student_to_teacher(self) -> None:
        """teacher <- student for every teacher tensor whose name the student has (all of them, by design)."""
        student = self.student.state_dict()
        teacher = self.teacher.state_dict()
        missing = sorted(set(teacher) - set(student))
        if missing:
            raise ConfigError(f"Teacher tensors without a student counterpart: {missing[:10]}")
        self.teacher.load_state_dict({k: student[k] for k in teacher}, strict=True)

    def train(self, mode: bool = True) -> PLStitchModel:
        """Train the student; the teacher always runs in eval mode (no dropout, like DINO's teacher)."""
        super().train(mode)
        self.teacher.eval()
        return self

    def forward(
        self, batch: dict[str, Tensor], epoch: int = 0, jigsaw_weight: float | None = None
    ) -> dict[str, Tensor]:
        """Losses of one batch: `loss` (weighted sum) and the unweighted `vid`, `mim`, `jigsaw` that ran.

        Each branch of `BRANCHES` runs when its `lambda_*` is > 0; `jigsaw_weight` (the ramp) replaces
        `lambda_jigsaw` as its weight and, at 0, skips it.
        """
        loss = self.config.loss
        weights = branch_weights(loss)
        if jigsaw_weight is not None:
            weights["jigsaw"] = jigsaw_weight if weights["jigsaw"] > 0 else 0.0
        out: dict[str, Tensor] = {}
        total = None
        terms = []
        for name, weight in weights.items():
            if weight > 0:
                with record_function(f"plstitch:forward-{name}"):  # a profile's ranges (gpu.py --profile)
                    out[name] = self.branch_loss(name, batch, epoch)
                terms.append(weight * out[name])
        for term in terms:
            total = term if total is None else total + term
        out["loss"] = total
        return out

    def branch_loss(self, name: str, batch: dict[str, Tensor], epoch: int = 0) -> Tensor:
        """The unweighted loss of branch `name` (config/branches.py) on `batch`; the one dispatch on names."""
        if name == "vid":
            return self.video_loss(batch["clip"])
        if name == "mim":
            return self.mim_loss(batch["crops"], batch["masks"][:, :2], epoch, batch.get("local_crops"))
        if name == "jigsaw":
            return self.jigsaw_loss(batch["context"], batch["masks"][:, 2])
        raise ConfigError(
            f"Branch {branch(name).name!r} has no loss in PLStitchModel.branch_loss; add it there."
        )

    def video_loss(self, clip: Tensor) -> Tensor:
        """L_vid on clips [B, k, 3, H, W] in true order: CLS (PE on, with grad) -> head -> the objective."""
        batch, k = clip.shape[:2]
        clip, target = self.objective.prepare(clip)  # e.g. the permutation objective's shuffle
        feats = self.student["backbone"](clip.flatten(0, 1))[:, 0].reshape(batch, k, -1)
        return self.objective(self.student[self.objective.head_name](feats), target)

    def mim_loss(self, crops: Tensor, masks: Tensor, epoch: int, local_crops: Tensor | None = None) -> Tensor:
        """iBOT on two global crops [B, 2, 3, H, W] with block masks [B, 2, h, w] (view-major inside), plus
        the CLS terms of the student's local crops [B, L, 3, h, w] if given (the teacher sees globals)."""
        student_local_cls = None
        if local_crops is not None and local_crops.shape[1]:
            local_tokens = self.student["backbone"](local_crops.transpose(0, 1).flatten(0, 1))
            student_local_cls = self.student["ibot_head"](local_tokens[:, :1])[0]
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
            student_local_cls=student_local_cls,
        )
        return losses["total"]

    def jigsaw_loss(self, context: Tensor, masks: Tensor) -> Tensor:
        """L_jigsaw = L_PL(s, (1..N)) per item: all N patches of the masked current frame, in raster order.

        `context` is [B, 3, 3, H, W] = (past, current, future), `masks` [B, h, w] the current frame's block
        mask. Every frame is encoded without position embedding; the current one with `masked_embed` at the
        masked patches, the past and future without gradient (their 2N patch tokens are keys and values).
        """
        batch = context.shape[0]
        backbone = self.student["backbone"]
        queries = backbone(context[:, 1], masks=masks, pos_embed=False)[:, 1:]
        with torch.no_grad():
            keys = backbone(context[:, 0::2].flatten(0, 1), pos_embed=False)[:, 1:]
            keys = keys.reshape(batch, -1, keys.shape[-1])
        return pl_loss_per_item(self.student["jigsaw_head"](queries, keys))

    @torch.no_grad()
    def update_teacher(self, momentum: float) -> None:
        """teacher = m * teacher + (1 - m) * student over the parameter names both have (iBOT's rule).

        The student's `masked_embed` and patch last layer `last_layer2` have no teacher counterpart.
        """
        student = dict(self.student.named_parameters())
        pairs = [(t, student[name]) for name, t in self.teacher.named_parameters() if name in student]
        teacher = [t for t, _ in pairs]
        torch._foreach_mul_(teacher, momentum)  # one launch per group on a GPU, the loop's arithmetic
        torch._foreach_add_(teacher, [s.detach() for _, s in pairs], alpha=1 - momentum)

    def param_groups(self) -> list[dict[str, Any]]:
        """AdamW groups: weight decay on matrices, none on biases and norm/1-d parameters (DINO's rule)."""
        decay, no_decay = [], []
        for name, param in self.student.named_parameters():
            if not param.requires_grad:
                continue
            (no_decay if name.endswith(".bias") or param.ndim <= 1 else decay).append(param)
        return [{"params": decay, "apply_wd": True}, {"params": no_decay, "apply_wd": False}]

    def clipped_parameters(self) -> list[nn.Parameter]:
        """Trainable parameters whose gradients are clipped: backbone and iBOT head only.

        Why: the authors clip their `student` wrapper (backbone + iBOT head); the temporal head and the
        jigsaw decoder are separate modules there and are never clipped.
        """
        parts = [self.student[name] for name in ("backbone", "ibot_head") if name in self.student]
        return [p for part in parts for p in part.parameters() if p.requires_grad]

    def last_layer_parameters(self) -> list[nn.Parameter]:
        """iBOT head last-layer parameters (frozen during the first epoch(s))."""
        return self.student["ibot_head"].last_layer_parameters() if "ibot_head" in self.student else []
