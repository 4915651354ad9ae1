"""Direct measure of procedural order: Kendall tau between the temporal head's frame ranking and time.

The head scores higher = earlier, so tau is taken between `-scores` and frame times: +1 = the head orders the
frames as they happen, -1 = exactly reversed (what a time-reversed model gives), 0 = no order. A distance
between encoders cannot tell these apart (a reversed objective is solved by negating the head's last layer).

Each held-out video is scored in clips of K frames spread over the whole video: clip c takes the frames at
`floor((j + c / C) * T / K)`, j = 0..K-1, i.e. K evenly spaced frames with a phase that moves by 1/C of the
spacing from clip to clip, so C clips cover the video without repeating (while C <= T / K). A video's tau is
the mean over its clips; the result is the mean +- population std over videos.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from plstitch_eval.analysis.progression import score_clips
from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.hub.ranking_head import load_temporal_head
from plstitch_eval.store.features import FeatureStore


def kendall_tau_of_scores(scores: np.ndarray, frame_times: np.ndarray) -> float:
    """Kendall tau-b of (-scores, frame_times): +1 = the head ranks frames in the order they happen.

    Constant scores (or fewer than two frames) carry no order and give 0.0 rather than NaN.
    """
    # lazy: scipy.stats costs seconds to import (python -X importtime); only tau needs it
    from scipy.stats import kendalltau

    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(frame_times, dtype=np.float64)
    if s.shape != t.shape or s.ndim != 1:
        raise EvaluationError(f"Scores {s.shape} and frame times {t.shape} must be two [T] arrays.")
    if len(s) < 2 or np.all(s == s[0]) or np.all(t == t[0]):
        return 0.0
    return float(kendalltau(-s, t, variant="b").statistic)


def spread_clips(n_frames: int, clip_len: int, n_clips: int) -> np.ndarray:
    """[C, K] frame indices: K evenly spaced frames over the video, the phase shifted by 1/C per clip."""
    if clip_len < 2 or n_clips < 1:
        raise ConfigError(f"clip_len must be >= 2 and n_clips >= 1, got {clip_len} and {n_clips}.")
    if n_frames < clip_len:
        raise EvaluationError(f"A video of {n_frames} frames cannot give clips of {clip_len} frames.")
    phase = np.arange(n_clips)[:, None] / n_clips
    idx = np.floor((np.arange(clip_len)[None, :] + phase) * n_frames / clip_len).astype(np.int64)
    return np.minimum(idx, n_frames - 1)


def video_order_tau(
    features: np.ndarray,
    frame_times: np.ndarray,
    head: Callable[[torch.Tensor], torch.Tensor],
    clip_len: int = 8,
    n_clips: int = 16,
    device: torch.device | str = "cpu",
) -> np.ndarray:
    """Kendall tau of every spread clip of one video [T, D] -> [C] (see the module docstring)."""
    clips = spread_clips(len(features), clip_len, n_clips)
    x = torch.as_tensor(np.asarray(features, dtype=np.float32), device=device)
    scores = score_clips(x, head, torch.as_tensor(clips, device=device)).cpu().numpy()
    times = np.asarray(frame_times, dtype=np.float64)
    return np.array([kendall_tau_of_scores(s, times[c]) for s, c in zip(scores, clips, strict=True)])


def head_order_tau(
    videos: dict[str, tuple[np.ndarray, np.ndarray]],
    head: Callable[[torch.Tensor], torch.Tensor],
    clip_len: int = 8,
    n_clips: int = 16,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """Mean +- std over videos of the per-video mean clip tau; `videos`: name -> (features, frame_times)."""
    per_video = {}
    for name, (feats, times) in videos.items():
        if len(feats) < clip_len:
            continue  # too short for one clip; counted in `skipped`
        per_video[name] = float(video_order_tau(feats, times, head, clip_len, n_clips, device).mean())
    if not per_video:
        raise EvaluationError(f"No video has at least {clip_len} frames; lower the clip length.")
    taus = np.array(list(per_video.values()))
    return {
        "tau_mean": float(taus.mean()),
        "tau_std": float(taus.std()),
        "n_videos": len(taus),
        "skipped": sorted(set(videos) - set(per_video)),
        "clip_len": clip_len,
        "n_clips": n_clips,
        "sign": "tau of (-head score, frame time): +1 = frames ranked in the order they happen",
        "per_video": per_video,
    }


def read_split_videos(store_dir: str | Path, split: str | None = "test") -> dict[str, tuple[np.ndarray, ...]]:
    """name -> (features, frame_times) of one split of a feature store (all videos when split is None)."""
    store = FeatureStore(store_dir)
    names = store.splits().get(split, []) if split else store.videos()
    if not names:
        raise ConfigError(f"{store_dir}: split {split!r} is missing or empty; try another split.")
    return {v.video: (v.features, v.frame_times) for v in store.read_many(names)}


def model_order_tau(
    model: str | Path,
    store_dir: str | Path,
    split: str | None = "test",
    clip_len: int = 8,
    n_clips: int = 16,
    device: torch.device | str = "cpu",
) -> dict[str, Any]:
    """Kendall tau of the temporal head of `model` (any head spec) on its own features in `store_dir`."""
    head = load_temporal_head(str(model), device)
    videos = read_split_videos(store_dir, split)
    in_dim = head.config["in_dim"]
    dims = {int(features.shape[1]) for features, _ in videos.values()}
    if dims != {in_dim}:
        raise EvaluationError(
            f"{store_dir}: features are {', '.join(map(str, sorted(dims)))}-d but the temporal head of "
            f"{model} takes {in_dim}-d; pass the feature store extracted with that model."
        )
    result = head_order_tau(videos, head, clip_len, n_clips, device)
    return {"model": str(model), "features": str(store_dir), "split": split, **result}
