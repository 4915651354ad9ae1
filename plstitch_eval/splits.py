"""Train/val/test video lists of a feature store, held-out validation videos and CV folds - always by video.

`check_holdout` refuses, before training, a store whose training videos cannot give validation videos, in one
line that says how to record a val split.

Why its own home: every protocol (k-NN, linear, temporal, CV) and the saved probes take their videos from
here, so frames of one video never sit on both sides of a split.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from plstitch_eval.errors import ConfigError, EvaluationError, PlstitchError
from plstitch_eval.store.features import MANIFEST, FeatureStore


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


def schemes_with_val(store: FeatureStore) -> list[str]:
    """The split schemes the store's manifest records with validation videos (what `--split-scheme` takes)."""
    manifest = store.manifest
    names = list(manifest.get("split_schemes") or {})
    nested = manifest.get("splits") or {}
    if nested and all(isinstance(v, dict) for v in nested.values()):
        names += [name for name in nested if name not in names]
    found = []
    for name in names:
        try:
            if resolve_splits(store, name)["val"]:
                found.append(name)
        except PlstitchError:
            continue
    return found


def record_val_fix(store: FeatureStore, scheme: str | None) -> str:
    """How to give a store validation videos: a recorded scheme that has them, or the manifest entry."""
    manifest = store.manifest
    if scheme is not None and scheme in (manifest.get("split_schemes") or {}):
        entry = f'"split_schemes" > "{scheme}"'
    elif scheme is not None and isinstance((manifest.get("splits") or {}).get(scheme), dict):
        entry = f'"splits" > "{scheme}"'
    else:
        entry = '"splits"'
    edit = (
        f'record a val split: in {store.root / MANIFEST}, move some videos from the "train" list of '
        f'{entry} into a "val" list beside it (e.g. "val": ["<video>", ...])'
    )
    others = [name for name in schemes_with_val(store) if name != scheme]
    if others:
        return f"pass --split-scheme {others[0]} (recorded with val videos: {', '.join(others)}), or {edit}"
    return edit


def check_holdout(store: FeatureStore, scheme: str | None, val_fraction: float, chooses: str) -> None:
    """Refuse, before any training, a store without val videos whose training videos cannot be held out.

    Why: a probe `chooses` (e.g. "the linear probe chooses its head") on validation videos; one training
    video cannot be split, and `--val-fraction` 0 (or >= 1) would hold out none (or all), so the one line
    names the flag to change or how to record a val split: the advice of `plstitch temporal`
    (`record_val_fix`); the linear probe, the tool probe and the MS-TCN share it.
    """
    splits = resolve_splits(store, scheme)
    if splits["val"] or not splits["train"]:
        return  # an official val split, or no training videos at all (refused with the other splits)
    where = f"{store.root / MANIFEST}" + (f" (scheme {scheme!r})" if scheme else "")
    if len(splits["train"]) < 2:
        raise EvaluationError(
            f"{where} records 1 training video and no 'val' split, and {chooses} on validation videos "
            f"that are not training videos; {record_val_fix(store, scheme)}."
        )
    if not 0 < val_fraction < 1:
        held = "none" if val_fraction <= 0 else "all"
        raise ConfigError(
            f"--val-fraction {val_fraction:g} would hold out {held} of the {len(splits['train'])} training "
            f"videos of {where}, which records no 'val' split, and {chooses} on held-out videos: pass "
            f"--val-fraction between 0 and 1 (e.g. the default 0.2), or {record_val_fix(store, scheme)}."
        )


def cv_videos(store: FeatureStore) -> list[str]:
    """Every video of the store's recorded splits, sorted (its videos when it records none): what a
    cross-validation splits into folds, each tested once."""
    return sorted({v for split in resolve_splits(store).values() for v in split}) or store.videos()


def kfold_by_video(videos: Sequence[str], folds: int = 5, seed: int = 0) -> list[list[str]]:
    """Partition videos into `folds` seeded, near-equal test folds (each video in exactly one)."""
    videos = list(videos)
    if folds < 2 or folds > len(videos):
        raise ConfigError(f"--folds must be between 2 and the number of videos ({len(videos)}), got {folds}.")
    order = np.random.default_rng(seed).permutation(len(videos))
    return [sorted(videos[i] for i in part) for part in np.array_split(order, folds)]
