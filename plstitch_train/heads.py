"""Projection heads of PL-Stitch: jigsaw `h_jigsaw`, iBOT `h_MIM`, the permutation classifier (ablation).

`TemporalHead` (`h_vid`) lives in `plstitch_eval.hub.ranking_head` so evaluation can load it without the
trainer; it is re-exported here. Parameter names follow the authors' modules, so the `temporal_head` and
`puzzle_decoder` state dicts of a released `pl_*.pth` load strictly (`load_temporal_head`,
`load_jigsaw_head`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub.ranking_head import (
    AUTHORS_TEMPORAL_HEADS,
    TemporalHead,
    head_state_from_checkpoint,
    load_checked,
    load_temporal_head,
    resolve_head_source,
    save_temporal_head,
    sized_from_shapes,
    temporal_trunk,
)
from plstitch_eval.hub.safe_load import load_checkpoint
from plstitch_train.config import ModelConfig, flat_settings
from plstitch_train.config.model import PERMUTATION_HEADS
from plstitch_train.permutations import MAX_PERMUTATION_CLIP_LEN, check_clip_len

__all__ = [
    "IBOTHead",
    "JigsawBlock",
    "JigsawHead",
    "PermutationHead",
    "TemporalHead",
    "convert_ibot_head_state_dict",
    "default_jigsaw_heads",
    "jigsaw_head_from_state_dict",
    "load_jigsaw_head",
    "load_temporal_head",
    "save_temporal_head",
    "temporal_head_size",
]

JIGSAW_ATTN_SCALE = 4.0  # authors' PuzzleDecoder(attn_mul=4): the cross-attention output is scaled by 4
OFFICIAL_JIGSAW_KEY = "puzzle_decoder"  # entry of a released pl_*.pth


def default_jigsaw_heads(dim: int) -> int:
    """Authors' rule: 12 heads when D=768, else 8; a D that 8 does not divide gets its largest divisor <= 8.

    The fallback only matters for test-size models (the authors' rule would fail there); D=384 gives 8.
    """
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


class JigsawBlock(nn.Module):
    """One block of the jigsaw head: cross-attention to the context, self-attention, Linear, each post-norm.

    `x = LN1(s * CrossAttn(x, ctx, ctx) + x)`, `x = LN2(SelfAttn(x) + x)`, `x = LN3(Linear(x) + x)`, s = 4.
    Attribute names are the authors' (`auxiliary_*`) so their state dicts load as they are.
    """

    def __init__(self, dim: int, n_heads: int, attn_scale: float = JIGSAW_ATTN_SCALE, dropout: float = 0.0):
        super().__init__()
        self.attn_scale = attn_scale
        self.auxiliary_cross_attn = nn.MultiheadAttention(dim, n_heads, dropout=dropout, batch_first=True)
        self.auxiliary_layer_norm1 = nn.LayerNorm(dim)
        self.auxiliary_self_attn = nn.MultiheadAttention(dim, n_heads, dropout=dropout, batch_first=True)
        self.auxiliary_layer_norm2 = nn.LayerNorm(dim)
        self.auxiliary_linear = nn.Linear(dim, dim)
        self.auxiliary_layer_norm3 = nn.LayerNorm(dim)

    def forward(
        self,
        x: Tensor,
        context: Tensor,
        query_padding: Tensor | None = None,
        context_padding: Tensor | None = None,
    ) -> Tensor:
        """Queries [B, N, D] attend to context [B, M, D]; paddings are key_padding_masks (True = ignore)."""
        attended, _ = self.auxiliary_cross_attn(
            x, context, context, key_padding_mask=context_padding, need_weights=False
        )
        x = self.auxiliary_layer_norm1(self.attn_scale * attended + x)
        refined, _ = self.auxiliary_self_attn(x, x, x, key_padding_mask=query_padding, need_weights=False)
        x = self.auxiliary_layer_norm2(refined + x)
        return self.auxiliary_layer_norm3(self.auxiliary_linear(x) + x)


class JigsawHead(nn.Module):
    """Spatio-temporal jigsaw head `h_jigsaw`: current-frame patch tokens [B, N, D] -> one score per patch.

    `decoder` = `n_blocks` `JigsawBlock`s (queries = current patches, keys/values = past+future patches), then
    `scorer` = LN-Linear(D,D)-GELU-Linear(D,1) (last layer trunc-normal std 0.02, zero bias). Paper Sec. 3.5;
    the authors' `PuzzleDecoder(attn_mul=4, num_blocks=1)`, whose state-dict keys these are.
    """

    def __init__(
        self,
        dim: int,
        n_heads: int | None = None,
        n_blocks: int = 1,
        attn_scale: float = JIGSAW_ATTN_SCALE,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        n_heads = default_jigsaw_heads(dim) if n_heads is None else n_heads
        if n_heads < 1 or dim % n_heads != 0:
            raise ConfigError(f"JigsawHead: n_heads {n_heads} must divide dim {dim}")
        if n_blocks < 1:
            raise ConfigError(f"JigsawHead: n_blocks must be >= 1, got {n_blocks}")
        self.dim, self.n_heads = dim, n_heads
        self.decoder = nn.ModuleList(JigsawBlock(dim, n_heads, attn_scale, dropout) for _ in range(n_blocks))
        self.scorer = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 1))
        nn.init.trunc_normal_(self.scorer[-1].weight, std=0.02)
        nn.init.zeros_(self.scorer[-1].bias)

    def forward(
        self,
        queries: Tensor,
        context: Tensor,
        query_mask: Tensor | None = None,
        context_mask: Tensor | None = None,
    ) -> Tensor:
        """Scores [B, N]; optional `query_mask` / `context_mask` ([B, N] bool, True = real token) pad."""
        query_padding, context_padding = _key_padding(query_mask), _key_padding(context_mask)
        x = queries
        for block in self.decoder:
            x = block(x, context, query_padding, context_padding)
        return self.scorer(x).squeeze(-1)


def jigsaw_head_from_state_dict(
    state: Mapping[str, Tensor], n_heads: int | None = None, source: str = "state dict"
) -> JigsawHead:
    """A `JigsawHead` sized from tensor shapes (dim, blocks) and loaded strictly.

    Shapes cannot show the number of attention heads: `n_heads` None applies the authors' rule (12 if D=768
    else 8, see `default_jigsaw_heads`).
    """
    scorer = state.get("scorer.1.weight")
    if scorer is None:
        raise CheckpointError(
            f"{source}: not a PL-Stitch jigsaw head (no scorer.1.weight); keys start with "
            f"{sorted({k.split('.', 1)[0] for k in state})}."
        )
    blocks = {int(m.group(1)) for k in state if (m := re.match(r"decoder\.(\d+)\.", k))}
    head = sized_from_shapes(
        lambda: JigsawHead(int(scorer.shape[0]), n_heads, n_blocks=max(blocks, default=0) + 1), source
    )
    return load_checked(head, state, source)


def load_jigsaw_head(
    spec: str | os.PathLike,
    device: torch.device | str = "cpu",
    *,
    revision: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    trust_pickle: bool = False,
    n_heads: int | None = None,
) -> JigsawHead:
    """The jigsaw head of a training checkpoint (strict, eval mode): (queries [B,N,D], ctx [B,M,D]) -> [B,N].

    Specs: a released `pl_*.pth` (entry `puzzle_decoder`) by path, registry name or `hf-hub:` spec, or a
    `plstitch train` run folder / `last.ckpt` (heads as in its config). Exported folders carry no jigsaw head.
    """
    source = resolve_head_source(spec, revision=revision, cache_dir=cache_dir, folder_files=None)
    checkpoint = load_checkpoint(source, trust_pickle=trust_pickle)
    state, train_config = head_state_from_checkpoint(
        checkpoint, OFFICIAL_JIGSAW_KEY, "jigsaw_head", str(source)
    )
    heads = n_heads or flat_settings(train_config).get("jigsaw_heads") or None
    return jigsaw_head_from_state_dict(state, heads, f"{source} (jigsaw head)").to(device).eval()


class IBOTHead(nn.Module):
    """iBOT head for CLS and patch tokens: MLP (GELU) -> bottleneck -> L2 norm -> weight-normed Linear.

    `logits = W x / ||x||` with `W = g v / ||v||` (g fixed to 1 with `norm_last_layer`); Zhou et al., iBOT,
    ICLR 2022. `shared_head=True` projects patches with the CLS last layer (the teacher's form; needs
    patch_out_dim == out_dim); `shared_head=False` adds `last_layer2` for patches (the student's form).
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
    """Permutation-classification baseline: frame embeddings [B, k, D] in presentation order -> class logits.

    `kind="linear"`: one Linear over the k concatenated embeddings (Shuffle & Learn style). `kind="temporal"`:
    the PL temporal head's trunk - `reduce` (Linear D->hidden + GELU) and `temporal` (post-norm Transformer
    encoder), as in `TemporalHead` but without its scorer - per frame, its outputs [B, k, hidden] flattened
    in presentation order into a Linear(k*hidden -> classes). The trunk has no position embedding and is
    permutation-equivariant, so the shuffle's order reaches the classifier only through the flatten order.
    `n_classes` 0: all k! permutations (k <= 8); N > 0: the sampled set `permutation_set(k, N)`.
    """

    def __init__(
        self,
        dim: int,
        k: int,
        n_classes: int = 0,
        kind: str = "linear",
        hidden_dim: int | None = None,
        n_layers: int = 6,
        n_heads: int = AUTHORS_TEMPORAL_HEADS,
        ff_dim: int | None = None,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if n_classes == 0 and not 1 <= k <= MAX_PERMUTATION_CLIP_LEN:
            raise ConfigError(
                f"PermutationHead: clip_len {k} needs {math.factorial(max(k, 0))} classes; "
                f"permutation classification supports clip_len <= {MAX_PERMUTATION_CLIP_LEN} "
                "(use --objective pl or pairwise, or a sampled set: permutation_classes)"
            )
        check_clip_len(k, n_classes)
        if kind not in PERMUTATION_HEADS:
            choices = ", ".join(PERMUTATION_HEADS)
            raise ConfigError(f"PermutationHead: kind {kind!r} unknown; use one of {choices}")
        self.dim, self.k, self.kind = dim, k, kind
        self.n_classes = n_classes or math.factorial(k)
        width = dim
        if kind == "temporal":
            trunk = temporal_trunk(dim, hidden_dim, n_layers, n_heads, ff_dim, dropout, "PermutationHead")
            self.reduce, self.temporal, width = trunk.reduce, trunk.temporal, trunk.hidden_dim
        self.classifier = nn.Linear(k * width, self.n_classes)

    def trunk(self, frames: Tensor) -> Tensor:
        """Per-frame features [B, k, width]: the temporal trunk's outputs, or the embeddings for "linear"."""
        if frames.shape[1:] != (self.k, self.dim):
            raise ConfigError(f"PermutationHead expects [B, {self.k}, {self.dim}], got {tuple(frames.shape)}")
        if self.kind == "temporal":
            return self.temporal(self.reduce(frames))
        return frames

    def forward(self, frames: Tensor) -> Tensor:
        """Frame embeddings [B, k, D] in (shuffled) presentation order -> class logits [B, n_classes]."""
        return self.classifier(self.trunk(frames).flatten(1))


def temporal_head_size(model: ModelConfig, dim: int) -> tuple[int, int]:
    """(hidden width, feed-forward width) of the temporal head: D/2 and 4*hidden unless `model` sets them.

    The authors' `hidden_mul=0.5`; `temporal_dim` / `temporal_ff` of 0 (or None) mean "auto".
    """
    hidden = model.temporal_dim or dim // 2
    return hidden, model.temporal_ff or 4 * hidden
