"""Last-block CLS attention of a ViT, per head and averaged over heads, overlaid on the (preprocessed) frame.

timm's fused attention does not return weights, so a forward pre-hook on `blocks[-1].attn` captures its input
(the block's `norm1` output) and we recompute `softmax(q k^T * scale)` from the block's own `qkv`, `q_norm`,
`k_norm`. The CLS row over the patch tokens (prefix/register tokens dropped) is reshaped to the patch grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from plstitch_eval.analysis.style import new_figure, write_outputs
from plstitch_eval.errors import ConfigError, DataError
from plstitch_eval.hub import load_encoder
from plstitch_eval.utils.device import resolve_device

CMAP = "inferno"  # perceptually uniform, readable with colour-vision deficiencies


@dataclass
class AttentionConfig:
    """Settings of `plstitch analyze attention`."""

    model: str
    frames: list[str]
    out: Path = Path("figs")
    name: str = "attention"
    device: str = "cpu"
    alpha: float = 0.6


def _last_attention(model: torch.nn.Module) -> torch.nn.Module:
    """`model.blocks[-1].attn` of a timm ViT, or a ConfigError naming what is missing."""
    blocks = getattr(model, "blocks", None)
    attn = getattr(blocks[-1], "attn", None) if blocks is not None and len(blocks) else None
    if attn is None or not hasattr(attn, "qkv"):
        raise ConfigError(
            f"{type(model).__name__} is not a ViT with blocks[-1].attn.qkv; attention maps need a ViT."
        )
    return attn


@torch.no_grad()
def last_block_attention(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Last-block attention weights [B, heads, N, N] (rows sum to 1) of images `x` [B, 3, H, W]."""
    attn = _last_attention(model)
    captured: list[torch.Tensor] = []
    handle = attn.register_forward_pre_hook(lambda _m, args: captured.append(args[0].detach()))
    try:
        model.forward_features(x)
    finally:
        handle.remove()
    tokens = captured[-1]
    b, n, _ = tokens.shape
    qkv = attn.qkv(tokens).reshape(b, n, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    q, k = attn.q_norm(qkv[0]), attn.k_norm(qkv[1])
    return ((q * attn.scale) @ k.transpose(-2, -1)).float().softmax(dim=-1)


def cls_attention_maps(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    """CLS-to-patch attention of the last block as maps [B, heads, H/p, W/p]."""
    weights = last_block_attention(model, x)
    prefix = int(getattr(model, "num_prefix_tokens", 1))
    patch = model.patch_embed.patch_size
    grid = (x.shape[-2] // patch[0], x.shape[-1] // patch[1])
    cls_row = weights[:, :, 0, prefix:]
    if cls_row.shape[-1] != grid[0] * grid[1]:
        raise ConfigError(
            f"{cls_row.shape[-1]} patch tokens do not fill a {grid[0]}x{grid[1]} grid (unsupported layout)."
        )
    return cls_row.reshape(*cls_row.shape[:2], *grid)


def entropy_bits(p: np.ndarray) -> float:
    """Shannon entropy in bits of a (renormalised) attention map: low = focused, log2(N) = uniform."""
    p = np.asarray(p, dtype=np.float64).ravel()
    p = p / p.sum()
    nz = p[p > 0]
    return float(-(nz * np.log2(nz)).sum())


def denormalise(x: torch.Tensor, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """A normalised image [3, H, W] back to displayable float HWC in [0, 1]."""
    m = torch.tensor(mean, dtype=x.dtype).view(3, 1, 1)
    s = torch.tensor(std, dtype=x.dtype).view(3, 1, 1)
    return (x.cpu() * s + m).clamp(0, 1).permute(1, 2, 0).numpy()


def upsample(maps: torch.Tensor, size: tuple[int, int]) -> np.ndarray:
    """Bilinear upsampling of maps [..., h, w] to `size`, each map rescaled to [0, 1] for display."""
    lead = maps.shape[:-2]
    up = F.interpolate(maps.reshape(-1, 1, *maps.shape[-2:]).float(), size=size, mode="bilinear")
    up = up.reshape(*lead, *size)
    lo = up.flatten(-2).min(-1).values[..., None, None]
    hi = up.flatten(-2).max(-1).values[..., None, None]
    return ((up - lo) / (hi - lo).clamp_min(1e-12)).numpy()


def plot_attention(
    images: list[np.ndarray], maps: list[np.ndarray], names: list[str], alpha: float, title: str
):
    """Per frame: the frame, the head-averaged overlay and one overlay per head (wrapped at 8 columns)."""
    n_heads = maps[0].shape[0]
    panels = n_heads + 2
    cols = min(panels, 8)
    rows_per = int(np.ceil(panels / cols))
    fig = new_figure(1.7 * cols, 1.85 * rows_per * len(images) + 0.5)
    axes = fig.subplots(rows_per * len(images), cols, squeeze=False)
    for ax in axes.ravel():
        ax.axis("off")
    for f, (image, fmaps, name) in enumerate(zip(images, maps, names, strict=True)):
        tiles = [("frame: " + name, None), ("mean of heads", fmaps.mean(0))]
        tiles += [(f"head {h}", fmaps[h]) for h in range(n_heads)]
        for i, (label, amap) in enumerate(tiles):
            ax = axes[f * rows_per + i // cols, i % cols]
            ax.imshow(image)
            if amap is not None:
                ax.imshow(amap, cmap=CMAP, alpha=alpha, vmin=0, vmax=1)
            ax.set_title(label, fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def run_attention(config: AttentionConfig) -> tuple[Path, Path, dict[str, Any]]:
    """Load the encoder and frames, compute last-block CLS attention, draw overlays and save them."""
    if not config.frames:
        raise ConfigError("Give at least one image with --frames.")
    device = resolve_device(config.device)
    encoder = load_encoder(config.model, device=str(device))
    model = encoder.model
    images, maps, per_frame = [], [], {}
    for path in map(Path, config.frames):
        if not path.is_file():
            raise DataError(f"{path}: no such image file.")
        try:
            pil = Image.open(path).convert("RGB")
        except OSError as exc:
            raise DataError(f"{path}: not a readable image ({exc}).") from exc
        x = encoder.transform(pil)
        grid_maps = cls_attention_maps(model, x[None].to(device))[0].cpu()  # [heads, h, w]
        cfg = encoder.data_config
        image = denormalise(x, tuple(cfg.mean), tuple(cfg.std))
        images.append(image)
        maps.append(upsample(grid_maps, image.shape[:2]))
        mean_map = grid_maps.mean(0)
        per_frame[path.name] = {
            "path": str(path),
            "grid": list(grid_maps.shape[-2:]),
            "mean_map": np.round(mean_map.numpy(), 6).tolist(),
            "mean_entropy_bits": entropy_bits(mean_map.numpy()),
            "head_entropy_bits": [entropy_bits(m.numpy()) for m in grid_maps],
            "head_maps": np.round(grid_maps.numpy(), 6).tolist(),
        }
    title = f"Last-block CLS attention of {config.model} (each map min-max scaled)"
    fig = plot_attention(images, maps, [Path(p).name for p in config.frames], config.alpha, title)
    data = {
        "analysis": "attention",
        "model": config.model,
        "n_heads": int(maps[0].shape[0]),
        "input_size": list(images[0].shape[:2]),
        "frames": per_frame,
    }
    png, js = write_outputs(fig, data, config.out, config.name)
    return png, js, data
