"""Train/val/test video lists of a feature store, held-out validation videos and CV folds - always by video.

Why its own home: every protocol (k-NN, linear, temporal, CV) and the saved probes take their videos from
here, so frames of one video never sit on both sides of a split.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.features import FeatureStore


def resolve_splits(store: FeatureStore, scheme: str | None = None) -> dict[str, list[str]]:
    """Train/val/test video lists of the store, for a named scheme when the manifest holds several.

    Reads ``split_schemes[scheme]`` when a scheme is named and recorded, else ``splits`` (flat or by scheme).
    """
    manifest = store.manifest
    schemes = manifest.get("split_schemes") or {}
    if scheme is not None and scheme in schemes:
        raw = schemes[scheme]
        return {s: list(raw.get(s, [])) for s in ("train", "val", "test")}
    if scheme is not None and scheme == manifest.get("split_scheme"):
        scheme = None
    raw = manifest.get("splits") or {}
    if raw and all(isinstance(v, dict) for v in raw.values()):
        if scheme is None:
            scheme = next(iter(raw))
        if scheme not in raw:
            raise ConfigError(
                f"{store.root}/manifest.json has no split scheme {scheme!r}; recorded: {sorted(raw)}."
            )
        raw = raw[scheme]
    elif scheme is not None and scheme not in raw:
        raise ConfigError(f"{store.root}/manifest.json records one split set, not scheme {scheme!r}.")
    splits = {k: list(v) for k, v in raw.items() if isinstance(v, list)}
    return {"train": splits.get("train", []), "val": splits.get("val", []), "test": splits.get("test", [])}


def holdout_by_video(
    videos: Sequence[str], fraction: float = 0.2, seed: int = 0
) -> tuple[list[str], list[str]]:
    """Split videos into (train, val) with round(fraction * n) >= 1 videos held out, seeded."""
    videos = list(videos)
    if len(videos) < 2:
        raise EvaluationError(
            f"Need >= 2 training videos to hold some out for validation, got {len(videos)}; "
            "record a val split in the store."
        )
    n_val = min(max(1, round(fraction * len(videos))), len(videos) - 1)
    order = np.random.default_rng(seed).permutation(len(videos))
    val = sorted(videos[i] for i in order[:n_val])
    return [v for v in videos if v not in set(val)], val


def kfold_by_video(videos: Sequence[str], folds: int = 5, seed: int = 0) -> list[list[str]]:
    """Partition videos into `folds` seeded, near-equal test folds (each video in exactly one)."""
    videos = list(videos)
    if folds < 2 or folds > len(videos):
        raise ConfigError(f"--folds must be between 2 and the number of videos ({len(videos)}), got {folds}.")
    order = np.random.default_rng(seed).permutation(len(videos))
    return [sorted(videos[i] for i in part) for part in np.array_split(order, folds)]
