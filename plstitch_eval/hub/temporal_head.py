"""PL-Stitch temporal head `h_vid` (one ranking score per frame) and its safetensors + JSON storage.

Lives in `plstitch_eval` so that evaluation (progression scores) can load a trained head without
`plstitch_train`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.utils.io import atomic_path, write_json_atomic

__all__ = [
    "HEAD_CONFIG_FILE",
    "HEAD_WEIGHTS_FILE",
    "TemporalHead",
    "load_temporal_head",
    "save_temporal_head",
]

HEAD_WEIGHTS_FILE = "temporal_head.safetensors"
HEAD_CONFIG_FILE = "temporal_head.json"


class TemporalHead(nn.Module):
    """Frame embeddings [B, K, D] -> ranking scores [B, K] (higher = earlier in the procedure).

    Linear(D->hidden)+GELU, a post-norm ReLU `nn.TransformerEncoder` (PyTorch defaults, batch_first) and a
    scorer Linear(hidden->hidden/2)-GELU-Linear(->1). No temporal position embedding: the head is
    permutation-equivariant, so the input order leaks nothing about the true order.
    """

    def __init__(
        self,
        in_dim: int,
        hidden_dim: int = 384,
        n_layers: int = 6,
        n_heads: int = 8,
        ff_dim: int = 1536,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        if hidden_dim % n_heads != 0:
            raise ConfigError(f"TemporalHead: hidden_dim {hidden_dim} must be divisible by n_heads {n_heads}")
        self.config: dict[str, Any] = {
            "in_dim": int(in_dim),
            "hidden_dim": int(hidden_dim),
            "n_layers": int(n_layers),
            "n_heads": int(n_heads),
            "ff_dim": int(ff_dim),
            "dropout": float(dropout),
        }
        self.input_proj = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.GELU())
        layer = nn.TransformerEncoderLayer(
            d_model=hidden_dim, nhead=n_heads, dim_feedforward=ff_dim, dropout=dropout, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=n_layers, enable_nested_tensor=False)
        self.scorer = nn.Sequential(
            nn.Linear(hidden_dim, hidden_dim // 2), nn.GELU(), nn.Linear(hidden_dim // 2, 1)
        )

    def forward(self, frames: Tensor, mask: Tensor | None = None) -> Tensor:
        """Score each frame; `mask` [B, K] bool marks the valid frames of padded clips (others unattended)."""
        x = self.input_proj(frames)
        padding = None if mask is None else ~mask.to(device=frames.device, dtype=torch.bool)
        x = self.encoder(x, src_key_padding_mask=padding)
        return self.scorer(x).squeeze(-1)


def save_temporal_head(head: TemporalHead, out_dir: str | os.PathLike) -> Path:
    """Write `temporal_head.safetensors` and `temporal_head.json` (constructor arguments) into `out_dir`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in head.state_dict().items()}
    with atomic_path(out_dir / HEAD_WEIGHTS_FILE) as tmp:
        save_file(state, str(tmp), metadata={"format": "pt", "module": "TemporalHead"})
    write_json_atomic(out_dir / HEAD_CONFIG_FILE, head.config)
    return out_dir


def load_temporal_head(directory: str | os.PathLike, device: torch.device | str = "cpu") -> TemporalHead:
    """Build a `TemporalHead` from the JSON arguments and load its weights strictly (eval mode)."""
    directory = Path(directory)
    config_path, weights_path = directory / HEAD_CONFIG_FILE, directory / HEAD_WEIGHTS_FILE
    for path in (config_path, weights_path):
        if not path.is_file():
            raise CheckpointError(
                f"{path} not found; save the head with save_temporal_head(head, {directory})"
            )
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{config_path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    if not isinstance(config, dict):
        raise CheckpointError(f"{config_path}: expected a JSON object of TemporalHead arguments")
    try:
        head = TemporalHead(**config)
    except (TypeError, ConfigError) as exc:
        raise CheckpointError(
            f"{config_path}: invalid TemporalHead arguments ({exc}); re-export the head"
        ) from exc
    state = load_file(str(weights_path))
    _check_state_dict(head, state, weights_path)
    head.load_state_dict(state, strict=True)
    return head.to(device).eval()


def _check_state_dict(head: nn.Module, state: dict[str, Tensor], path: Path) -> None:
    """Raise CheckpointError listing missing, unexpected and mis-shaped keys."""
    expected = head.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    mis_shaped = [
        f"{k}: file {tuple(state[k].shape)} vs model {tuple(expected[k].shape)}"
        for k in sorted(set(expected) & set(state))
        if state[k].shape != expected[k].shape
    ]
    if missing or unexpected or mis_shaped:
        parts = []
        if missing:
            parts.append(f"missing {missing[:8]}")
        if unexpected:
            parts.append(f"unexpected {unexpected[:8]}")
        if mis_shaped:
            parts.append(f"shape mismatch {mis_shaped[:8]}")
        raise CheckpointError(
            f"{path} does not match the TemporalHead described by {HEAD_CONFIG_FILE}: " + "; ".join(parts)
        )
