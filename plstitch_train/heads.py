"""Projection heads of PL-Stitch: temporal ranking (re-exported), jigsaw, iBOT, permutation classifier."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.temporal_head import TemporalHead, load_temporal_head, save_temporal_head
from plstitch_train.losses import MAX_PERMUTATION_CLIP_LEN, permutation_logits_from_scores

__all__ = [
    "IBOTHead",
    "JigsawHead",
    "PermutationHead",
    "TemporalHead",
    "convert_ibot_head_state_dict",
    "default_jigsaw_heads",
    "permutation_logits_from_scores",
    "load_temporal_head",
    "save_temporal_head",
]


def default_jigsaw_heads(dim: int) -> int:
    """Authors' choice: 12 heads for D=768, else 8; for tiny dims the largest divisor of D that is <= 8."""
    if dim == 768:
        return 12
    return max(h for h in range(1, 9) if dim % h == 0)


def _key_padding(valid: Tensor | None) -> Tensor | None:
    """Validity mask [B, N] -> MultiheadAttention key_padding_mask; all-padded rows attend everywhere."""
    if valid is None:
        return None
    padding = ~valid.to(torch.bool)
    all_padded = padding.all(dim=1, keepdim=True)
    return padding & ~all_padded  # such rows' outputs are ignored downstream; this only avoids NaNs


class JigsawHead(nn.Module):
    """Spatio-temporal jigsaw head `h_jigsaw`: masked current-frame patches [B, Nq, D] -> one score per patch.

    One block as in the authors' code: cross-attention (queries = current patches, keys/values = past+future
    context patches), residual, LayerNorm; self-attention, LayerNorm; Linear, LayerNorm; then the scorer
    LayerNorm-Linear(D,D)-GELU-Linear(D,1). The description has no residual around the self-attention;
    `self_attn_residual=True` adds one.
    """

    def __init__(
        self, dim: int, n_heads: int | None = None, dropout: float = 0.0, self_attn_residual: bool = False
    ) -> None:
        super().__init__()
        n_heads = default_jigsaw_heads(dim) if n_heads is None else n_heads
        if dim % n_heads != 0:
            raise ConfigError(f"JigsawHead: n_heads {n_heads} must divide dim {dim}")
        self.dim, self.n_heads, self.self_attn_residual = dim, n_heads, self_attn_residual
        self.cross_attn = nn.MultiheadAttention(dim, n_heads, dropout=dropout, batch_first=True)
        self.norm_cross = nn.LayerNorm(dim)
        self.self_attn = nn.MultiheadAttention(dim, n_heads, dropout=dropout, batch_first=True)
        self.norm_self = nn.LayerNorm(dim)
        self.linear = nn.Linear(dim, dim)
        self.norm_linear = nn.LayerNorm(dim)
        self.scorer = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 1))

    def forward(
        self,
        queries: Tensor,
        context: Tensor,
        query_mask: Tensor | None = None,
        context_mask: Tensor | None = None,
    ) -> Tensor:
        """Scores [B, Nq]; `query_mask` / `context_mask` ([B, N] bool, True = real token) handle padding."""
        context_padding = _key_padding(context_mask)
        query_padding = _key_padding(query_mask)
        attended, _ = self.cross_attn(
            queries, context, context, key_padding_mask=context_padding, need_weights=False
        )
        x = self.norm_cross(queries + attended)
        refined, _ = self.self_attn(x, x, x, key_padding_mask=query_padding, need_weights=False)
        x = self.norm_self(x + refined if self.self_attn_residual else refined)
        x = self.norm_linear(self.linear(x))
        return self.scorer(x).squeeze(-1)


class IBOTHead(nn.Module):
    """iBOT head for CLS and patch tokens: MLP (GELU) -> bottleneck -> L2 norm -> weight-normed Linear.

    `shared_head=True` projects patches with the CLS last layer (needs patch_out_dim == out_dim); otherwise a
    second last layer `last_layer2` of `patch_out_dim`. With `norm_last_layer` the weight norm g is fixed
    to 1.
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int = 8192,
        patch_out_dim: int = 8192,
        hidden_dim: int = 2048,
        bottleneck_dim: int = 256,
        n_layers: int = 3,
        shared_head: bool = True,
        norm_last_layer: bool = True,
    ) -> None:
        super().__init__()
        if n_layers < 1:
            raise ConfigError(f"IBOTHead: n_layers must be >= 1, got {n_layers}")
        if shared_head and patch_out_dim != out_dim:
            raise ConfigError(
                f"IBOTHead: shared_head needs patch_out_dim == out_dim (got {patch_out_dim} vs {out_dim}); "
                "set shared_head=False for a separate patch projection"
            )
        self.out_dim, self.patch_out_dim, self.shared_head = out_dim, patch_out_dim, shared_head
        if n_layers == 1:
            self.mlp: nn.Module = nn.Linear(in_dim, bottleneck_dim)
        else:
            layers: list[nn.Module] = [nn.Linear(in_dim, hidden_dim), nn.GELU()]
            for _ in range(n_layers - 2):
                layers += [nn.Linear(hidden_dim, hidden_dim), nn.GELU()]
            layers.append(nn.Linear(hidden_dim, bottleneck_dim))
            self.mlp = nn.Sequential(*layers)
        self.apply(_init_linear)
        self.last_layer = _weight_normed_linear(bottleneck_dim, out_dim, norm_last_layer)
        self.last_layer2 = (
            None if shared_head else _weight_normed_linear(bottleneck_dim, patch_out_dim, norm_last_layer)
        )

    def forward(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """Tokens [B, 1+N, D] (CLS first) -> (CLS logits [B, out_dim], patch logits [B, N, patch_out_dim])."""
        x = F.normalize(self.mlp(tokens), dim=-1, p=2)
        patch_layer = self.last_layer if self.last_layer2 is None else self.last_layer2
        return self.last_layer(x[:, 0]), patch_layer(x[:, 1:])

    def last_layer_parameters(self) -> list[nn.Parameter]:
        """Parameters of the last layer(s), which the trainer freezes during the first epoch."""
        params = list(self.last_layer.parameters())
        if self.last_layer2 is not None:
            params += list(self.last_layer2.parameters())
        return params

    def cancel_last_layer_gradients(self) -> None:
        """Drop the gradients of the last layer(s) (call after backward while they should stay frozen)."""
        for p in self.last_layer_parameters():
            p.grad = None


def _init_linear(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


def _weight_normed_linear(in_dim: int, out_dim: int, fix_norm: bool) -> nn.Module:
    layer = weight_norm(nn.Linear(in_dim, out_dim, bias=False))
    magnitude = layer.parametrizations.weight.original0
    with torch.no_grad():
        magnitude.fill_(1.0)
    magnitude.requires_grad_(not fix_norm)
    return layer


def convert_ibot_head_state_dict(state: dict[str, Tensor]) -> dict[str, Tensor]:
    """Rename old-style weight-norm keys (`last_layer.weight_g/_v`, iBOT checkpoints) to parametrizations."""
    renamed = {}
    for key, value in state.items():
        key = key.replace("last_layer.weight_g", "last_layer.parametrizations.weight.original0")
        key = key.replace("last_layer.weight_v", "last_layer.parametrizations.weight.original1")
        key = key.replace("last_layer2.weight_g", "last_layer2.parametrizations.weight.original0")
        key = key.replace("last_layer2.weight_v", "last_layer2.parametrizations.weight.original1")
        renamed[key] = value
    return renamed


class PermutationHead(nn.Module):
    """Permutation-classification baseline: Linear over the k concatenated frame embeddings -> k! logits."""

    def __init__(self, dim: int, k: int) -> None:
        super().__init__()
        if not 1 <= k <= MAX_PERMUTATION_CLIP_LEN:
            raise ConfigError(
                f"PermutationHead: clip_len {k} needs {math.factorial(max(k, 0))} classes; "
                f"permutation classification supports clip_len <= {MAX_PERMUTATION_CLIP_LEN} "
                "(use --objective pl or pairwise)"
            )
        self.dim, self.k = dim, k
        self.classifier = nn.Linear(k * dim, math.factorial(k))

    def forward(self, frames: Tensor) -> Tensor:
        """Frame embeddings [B, k, D] in (shuffled) presentation order -> permutation logits [B, k!]."""
        if frames.shape[1:] != (self.k, self.dim):
            raise ConfigError(f"PermutationHead expects [B, {self.k}, {self.dim}], got {tuple(frames.shape)}")
        return self.classifier(frames.flatten(1))
