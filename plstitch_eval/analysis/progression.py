"""Progression score (paper supp.): the pretrained temporal head scores every frame of a video.

The head ranks a list of frames, higher score = earlier. Per video we turn scores into a progress value in
[0, 1] with min-max normalisation, `p_t = (max s - s_t) / (max s - min s)` (0 = looks like the start, 1 = the
end), resample it on a normalised time axis (`n_bins` bins of `i / (T - 1)`, the mean of the frames in each
bin, empty bins linearly interpolated) and average over videos (mean +- population std).

Scoring: by default the whole video is one list (the head has no positional embedding and is permutation
equivariant, so list order leaks nothing and all scores of a video share one scale). With `window=K` the video
is cut into windows of K consecutive frames every `stride` frames and each frame's score is the mean over the
windows that hold it; useful for very long videos, but the Plackett-Luce loss is shift-invariant per list, so
window scores are only comparable when the head scores mostly from frame content.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from plstitch_eval.analysis.frames import dataset_records, encode_records
from plstitch_eval.analysis.style import OKABE_ITO, new_figure, write_outputs
from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.ranking_head import load_temporal_head
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.device import resolve_device, resolve_precision


@dataclass
class ProgressionConfig:
    """Settings of `plstitch analyze progression`."""

    model: str
    dataset: str | None = None
    root: str | None = None
    features: str | None = None
    split: str | None = "test"
    fps: float | None = None
    max_videos: int = 0
    window: int = 0
    stride: int = 1
    n_bins: int = 100
    out: Path = Path("figs")
    name: str = "progression"
    device: str = "auto"
    precision: str = "auto"
    batch_size: int = 32


def window_starts(n_frames: int, window: int, stride: int) -> list[int]:
    """Starts of windows of `window` frames every `stride` frames; the last window ends at the last frame."""
    if window <= 0 or window >= n_frames:
        return [0]
    if stride <= 0:
        raise ConfigError(f"--stride must be >= 1, got {stride}.")
    starts = list(range(0, n_frames - window + 1, stride))
    if starts[-1] != n_frames - window:
        starts.append(n_frames - window)
    return starts


@torch.no_grad()
def score_frames(
    features: np.ndarray,
    head: Callable[[torch.Tensor], torch.Tensor],
    window: int = 0,
    stride: int = 1,
    device: torch.device | str = "cpu",
    batch_size: int = 64,
) -> np.ndarray:
    """Temporal-head score of every frame of one video [T, D] -> [T] (whole video, or mean over windows)."""
    x = torch.as_tensor(np.asarray(features, dtype=np.float32), device=device)
    n = len(x)
    if n == 0:
        return np.zeros(0, dtype=np.float64)
    if window <= 0 or window >= n:
        return head(x[None])[0].double().cpu().numpy()
    starts = torch.tensor(window_starts(n, window, stride), device=device)
    idx = starts[:, None] + torch.arange(window, device=device)  # [C, K]
    scores = score_clips(x, head, idx, batch_size)  # [C, K]
    total = torch.zeros(n, dtype=torch.float64, device=device)
    count = torch.zeros(n, dtype=torch.float64, device=device)
    total.index_add_(0, idx.reshape(-1), scores.reshape(-1))
    count.index_add_(0, idx.reshape(-1), torch.ones_like(scores).reshape(-1))
    return (total / count).cpu().numpy()


@torch.no_grad()
def score_clips(
    features: torch.Tensor,
    head: Callable[[torch.Tensor], torch.Tensor],
    clips: torch.Tensor,
    batch_size: int = 64,
) -> torch.Tensor:
    """Head scores [C, K] (float64) of clips, given as frame indices [C, K] into one video's [T, D]."""
    clips = torch.as_tensor(clips, device=features.device)
    out = [head(features[clips[i : i + batch_size]]).double() for i in range(0, len(clips), batch_size)]
    return torch.cat(out) if out else torch.zeros(clips.shape, dtype=torch.float64, device=features.device)


def minmax_progress(scores: np.ndarray) -> np.ndarray:
    """`(max s - s) / (max s - min s)`: 0 for the frame ranked earliest, 1 for the last; zeros if constant."""
    s = np.asarray(scores, dtype=np.float64)
    span = s.max() - s.min() if s.size else 0.0
    if span <= 0:
        return np.zeros_like(s)
    return (s.max() - s) / span


def bin_curve(values: np.ndarray, n_bins: int = 100) -> np.ndarray:
    """Mean of `values` in `n_bins` equal bins of normalised time `i / (T - 1)`; empty bins interpolated."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n == 0:
        raise EvaluationError("Cannot bin an empty score sequence (a video with no frames).")
    bins = np.minimum(np.arange(n) * n_bins // max(n - 1, 1), n_bins - 1)  # floor(i/(T-1) * n_bins), exact
    sums = np.bincount(bins, weights=v, minlength=n_bins)
    counts = np.bincount(bins, minlength=n_bins)
    centres = (np.arange(n_bins) + 0.5) / n_bins
    filled = counts > 0
    out = np.empty(n_bins, dtype=np.float64)
    out[filled] = sums[filled] / counts[filled]
    if not filled.all():
        out[~filled] = np.interp(centres[~filled], centres[filled], out[filled])
    return out


def aggregate_curves(curves: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Mean and population std over videos of equally binned curves."""
    stacked = np.stack(curves)
    return stacked.mean(axis=0), stacked.std(axis=0)


def spearman(values: np.ndarray) -> float:
    """Spearman rank correlation between progress values and frame order (1 = perfectly monotone)."""
    # lazy: scipy.stats costs seconds to import and predict imports this module for its scorer
    from scipy.stats import spearmanr

    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2 or np.all(v == v[0]):
        return 0.0
    return float(spearmanr(np.arange(len(v)), v).statistic)


def plot_progression(mean: np.ndarray, std: np.ndarray, curves: list[np.ndarray], title: str):
    """Mean progress over normalised time with a +-std band, thin per-video curves and the ideal diagonal."""
    n_bins = len(mean)
    x = (np.arange(n_bins) + 0.5) / n_bins * 100
    fig = new_figure(6.0, 4.0)
    ax = fig.add_subplot(1, 1, 1)
    for curve in curves[:30]:
        ax.plot(x, curve, color="#999999", lw=0.5, alpha=0.5)
    ax.fill_between(x, mean - std, mean + std, color=OKABE_ITO[4], alpha=0.35, label="mean ± std")
    ax.plot(x, mean, color=OKABE_ITO[0], lw=2.0, label=f"mean over {len(curves)} videos")
    ax.plot([0, 100], [0, 1], ls="--", color=OKABE_ITO[7], lw=1.0, label="linear progress")
    ax.set_xlim(0, 100)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("normalised time (% of video)")
    ax.set_ylabel("progress score (min-max normalised)")
    ax.set_title(title)
    ax.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def compute_progression(
    videos: dict[str, np.ndarray],
    head: Callable[[torch.Tensor], torch.Tensor],
    window: int = 0,
    stride: int = 1,
    n_bins: int = 100,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """Score, normalise and bin each video's features; returns per-video curves plus mean and std."""
    if not videos:
        raise EvaluationError("No videos to score for the progression figure.")
    per_video: dict[str, Any] = {}
    curves = []
    for name, feats in videos.items():
        progress = minmax_progress(score_frames(feats, head, window, stride, device))
        curve = bin_curve(progress, n_bins)
        curves.append(curve)
        per_video[name] = {"n_frames": len(progress), "spearman": spearman(progress), "curve": curve}
    mean, std = aggregate_curves(curves)
    return {"per_video": per_video, "mean": mean, "std": std, "curves": curves}


def render_progression(result: dict[str, Any], out: Path, name: str, meta: dict[str, Any]):
    """Draw the curve and write PNG + JSON (mean, std, per-video curves and Spearman correlations)."""
    title = f"Progression score on {meta.get('dataset') or meta.get('features', '')}"
    fig = plot_progression(result["mean"], result["std"], result["curves"], title)
    n_bins = len(result["mean"])
    data = {
        "analysis": "progression",
        **meta,
        "normalisation": "progress = (max(s) - s) / (max(s) - min(s)) per video; s = temporal-head score",
        "n_bins": n_bins,
        "bin_centres": ((np.arange(n_bins) + 0.5) / n_bins).tolist(),
        "mean": result["mean"].tolist(),
        "std": result["std"].tolist(),
        "mean_spearman": float(np.mean([v["spearman"] for v in result["per_video"].values()])),
        "per_video": {
            v: {"n_frames": d["n_frames"], "spearman": d["spearman"], "curve": d["curve"].tolist()}
            for v, d in result["per_video"].items()
        },
    }
    png, js = write_outputs(fig, data, out, name)
    return png, js, data


def run_progression(config: ProgressionConfig) -> tuple[Path, Path, dict[str, Any]]:
    """Load the model's temporal head (and backbone), get per-frame features, score, draw and save.

    `config.model` is any `load_encoder` spec that carries a temporal head: a training run or exported folder,
    a released `pl_*.pth`, or a registry name such as `pl-stitch-lemon`.
    """
    device = resolve_device(config.device)
    head = load_temporal_head(config.model, device)
    videos: dict[str, np.ndarray] = {}
    if config.features:
        store = FeatureStore(config.features)
        names = store.splits().get(config.split, []) if config.split else store.videos()
        if not names:
            raise ConfigError(
                f"{config.features}: split {config.split!r} is missing or empty; try --split all."
            )
        if config.max_videos > 0:
            names = names[: config.max_videos]
        videos = {v.video: v.features for v in store.read_many(names)}
    elif config.dataset:
        precision = resolve_precision(config.precision, device)
        encoder = load_encoder(config.model, device=str(device))
        adapter, records = dataset_records(config.dataset, config.root, config.split, config.fps)
        if config.max_videos > 0:
            records = records[: config.max_videos]
        for item in encode_records(
            records, {"model": encoder}, adapter.eval_fps, device, precision, config.batch_size
        ):
            logger.info("encoded %d frames of %s", len(item.frame_times), item.video)
            videos[item.video] = item.features["model"]
    else:
        raise ConfigError(
            "Give --dataset (with --root) to decode videos, or --features with a feature store."
        )
    result = compute_progression(videos, head, config.window, config.stride, config.n_bins, device)
    meta = {
        "model": str(config.model),
        "dataset": config.dataset,
        "features": config.features,
        "split": config.split,
        "scoring": {"window": config.window or "whole video", "stride": config.stride},
    }
    return render_progression(result, config.out, config.name, meta)
