"""MS-TCN (Farha and Gall, CVPR 2019): a multi-stage temporal convolution network over per-frame features.

Layer for layer the network of yabufarha/ms-tcn ``model.py`` (REFERENCE.md section 7), with the same module
names, so one of its checkpoints loads with ``strict=True`` and, under the same ``torch.manual_seed``, the
same PyTorch-default initialisation (modules are built in its order). Stage 1 maps D -> F with a 1x1 conv,
runs L dilated residual layers (dilation 2^i, kernel 3, ReLU, 1x1 conv, dropout, residual, times the mask) and
maps F -> C; stages 2..S take ``softmax(previous) * mask`` and map C -> F -> ... -> C. ``refine="sigmoid"``
feeds them ``sigmoid(previous) * mask`` instead: the regression variant, for outputs on targets in ~[0, 1].

``causal=True`` is TeCNO's variant (tobiascz/TeCNO ``models/mstcn.py``): each dilated conv is padded with
``2 * dilation`` zeros on the past side only, so the output at frame t depends on frames <= t alone.
Receptive field of one stage: ``2^(L+1) - 1`` frames (centred; causal: that many frames ending at t).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from plstitch_eval.errors import ConfigError

KERNEL_SIZE = 3
REFINES = ("softmax", "sigmoid")  # what stages 2..S see of the previous stage: classes, or [0, 1] regressions


class DilatedResidualLayer(nn.Module):
    """``(x + dropout(conv_1x1(relu(conv_dilated(x))))) * mask``; dilated conv kernel 3."""

    def __init__(self, dilation: int, channels: int, dropout: float = 0.5, causal: bool = False) -> None:
        super().__init__()
        self.dilation, self.causal = dilation, causal
        padding = 0 if causal else dilation  # causal: padded in forward, on the past side only
        self.conv_dilated = nn.Conv1d(channels, channels, KERNEL_SIZE, padding=padding, dilation=dilation)
        self.conv_1x1 = nn.Conv1d(channels, channels, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        inp = F.pad(x, ((KERNEL_SIZE - 1) * self.dilation, 0)) if self.causal else x
        out = self.dropout(self.conv_1x1(F.relu(self.conv_dilated(inp))))
        return (x + out) * mask


class SingleStageTCN(nn.Module):
    """One stage: 1x1 conv in_dim -> channels, `layers` dilated residual layers, 1x1 conv -> classes."""

    def __init__(
        self,
        layers: int,
        channels: int,
        in_dim: int,
        num_classes: int,
        dropout: float = 0.5,
        causal: bool = False,
    ) -> None:
        super().__init__()
        self.conv_1x1 = nn.Conv1d(in_dim, channels, 1)
        self.layers = nn.ModuleList(
            DilatedResidualLayer(2**i, channels, dropout, causal) for i in range(layers)
        )
        self.conv_out = nn.Conv1d(channels, num_classes, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = self.conv_1x1(x)
        for layer in self.layers:
            out = layer(out, mask)
        return self.conv_out(out) * mask


class MultiStageTCN(nn.Module):
    """MS-TCN: `stages` single-stage TCNs, each refining the softmax of the previous one.

    ``forward(x [B, D, T], mask [B, 1, T] or None = all frames) -> logits of every stage [S, B, C, T]``;
    predictions come from the last stage. The mask marks real frames (1) against batch padding (0).
    ``refine="sigmoid"``: later stages refine ``sigmoid(previous)`` (per-frame regression outputs).
    """

    def __init__(
        self,
        in_dim: int,
        num_classes: int,
        stages: int = 4,
        layers: int = 10,
        channels: int = 64,
        dropout: float = 0.5,
        causal: bool = False,
        refine: str = "softmax",
    ) -> None:
        super().__init__()
        if refine not in REFINES:
            raise ConfigError(f"MS-TCN refine must be softmax or sigmoid, got {refine!r}.")
        _check_sizes(in_dim=in_dim, num_classes=num_classes, stages=stages, layers=layers, channels=channels)
        if not 0 <= dropout < 1:
            raise ConfigError(f"MS-TCN dropout must be in [0, 1), got {dropout}.")
        self.in_dim, self.num_classes, self.causal, self.refine = in_dim, num_classes, causal, refine
        self.stage1 = SingleStageTCN(layers, channels, in_dim, num_classes, dropout, causal)
        self.stages = nn.ModuleList(
            SingleStageTCN(layers, channels, num_classes, num_classes, dropout, causal)
            for _ in range(stages - 1)
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if x.ndim != 3 or x.shape[1] != self.in_dim:
            raise ConfigError(
                f"MS-TCN input must be [batch, {self.in_dim}, frames], got {list(x.shape)}; "
                "pass features with the feature dimension the model was built for, transposed to [B, D, T]."
            )
        mask = x.new_ones(x.shape[0], 1, x.shape[2]) if mask is None else mask[:, :1].to(x.dtype)
        out = self.stage1(x, mask)
        outputs = [out]
        for stage in self.stages:
            squashed = F.softmax(out, dim=1) if self.refine == "softmax" else torch.sigmoid(out)
            out = stage(squashed * mask, mask)
            outputs.append(out)
        return torch.stack(outputs)


def _check_sizes(**sizes: int) -> None:
    for name, value in sizes.items():
        if value < 1:
            raise ConfigError(f"MS-TCN {name} must be >= 1, got {value}.")


def receptive_field(layers: int) -> int:
    """Frames one stage sees: ``1 + 2 * sum(2^i for i < layers) = 2^(layers+1) - 1`` (kernel 3)."""
    return 2 ** (layers + 1) - 1


def mstcn_loss(
    stage_logits: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor | None = None,
    smooth_weight: float = 0.15,
    tau: float = 4.0,
    ignore_index: int = -100,
) -> torch.Tensor:
    """MS-TCN's training loss, summed over stages: ``sum_s CE_s + smooth_weight * T-MSE_s``.

    ``T-MSE_s = mean(clamp((log_softmax(z_s)[:, :, t] - log_softmax(z_s).detach()[:, :, t-1])^2, 0, tau^2)
    * mask[:, :, t])`` over batch x classes x (T-1) positions (padding counts as 0, as in their code); CE is
    the mean over frames with a label. Labels < 0 (our -1 = unlabelled, or batch padding) are ignored by CE.
    `stage_logits` [S, B, C, T], `labels` [B, T], `mask` [B, 1, T] (None = all frames). A one-frame input has
    no smoothing term (MS-TCN would return NaN).
    """
    num_classes, frames = stage_logits.shape[2], stage_logits.shape[3]
    if mask is None:
        mask = stage_logits.new_ones(stage_logits.shape[1], 1, frames)
    mask = mask[:, :1].to(stage_logits.dtype)
    target = labels.masked_fill(labels < 0, ignore_index).reshape(-1)
    loss = stage_logits.new_zeros(())
    for logits in stage_logits:
        flat = logits.transpose(2, 1).reshape(-1, num_classes)
        loss = loss + F.cross_entropy(flat, target, ignore_index=ignore_index)
        if frames > 1:
            squared = F.mse_loss(
                F.log_softmax(logits[:, :, 1:], dim=1),
                F.log_softmax(logits.detach()[:, :, :-1], dim=1),
                reduction="none",
            )
            loss = loss + smooth_weight * torch.mean(torch.clamp(squared, min=0, max=tau**2) * mask[:, :, 1:])
    return loss


def truncated_change(values: torch.Tensor, pairs: torch.Tensor, tau: float) -> torch.Tensor:
    """Sum over the real consecutive frames `pairs` [..., T-1] of the squared frame-to-frame change of
    `values` [..., T] (the earlier frame detached), each clamped to tau^2: the smoothing term of the sigmoid
    MS-TCN variants (regression, multi-label), which divide it by their own count."""
    change = (values[..., 1:] - values.detach()[..., :-1]) ** 2
    return (torch.clamp(change, 0, tau**2) * pairs).sum()
