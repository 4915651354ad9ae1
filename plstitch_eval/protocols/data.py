"""What every protocol reads a store through: checked videos, labelled frames, the two-class rule, k clamping.

Splits come from the store manifest (``plstitch_eval.splits``). Frames labelled -1 (unlabelled) are dropped
from training and scoring. Test classes never seen in training are warned about and simply count as errors.
A training set (split, held-out remainder or CV fold) with labelled frames of fewer than two classes is
refused: every probe would predict that one class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from plstitch_eval.errors import EvaluationError, FeatureStoreError
from plstitch_eval.knn_vote import clamp_k
from plstitch_eval.metrics.relaxed import RelaxedSpec, relaxed_spec
from plstitch_eval.metrics.scoring import background_ids
from plstitch_eval.splits import holdout_by_video, resolve_splits
from plstitch_eval.store.features import MANIFEST, FeatureStore, VideoFeatures
from plstitch_eval.utils.console import logger

if TYPE_CHECKING:
    from plstitch_eval.protocols.fractions import SubsetDraw


def check_video(item: VideoFeatures, store: FeatureStore | None = None) -> None:
    """Refuse NaN/inf features or a video with no labelled frame, naming the video (and, with its `store`,
    the command that extracts it again)."""
    if not np.isfinite(item.features).all():
        row = int(np.flatnonzero(~np.isfinite(item.features).all(1))[0])
        fix = f"extract it again: {store.redo([item.video])}" if store is not None else "re-extract it"
        raise EvaluationError(f"Video {item.video!r}: frame {row} has NaN/inf features; {fix}")
    if len(item.labels) == 0 or not (item.labels >= 0).any():
        raise EvaluationError(
            f"Video {item.video!r} has no labelled frames (empty ground truth); remove it from the split."
        )


def check_labels(item: VideoFeatures, store: FeatureStore, class_names: Sequence[str]) -> None:
    """Refuse labels that the manifest's `class_names` do not cover (-1 = unlabelled is allowed).

    Why: such a store would be scored with classes the results JSON cannot name, so its numbers mislead.
    """
    labels = np.asarray(item.labels)
    bad = labels[(labels < -1) | (labels >= len(class_names))]
    if len(bad):
        n = len(class_names)
        allowed = f"0..{n - 1}" if n else "none, the list is empty"
        raise FeatureStoreError(
            f"{store.path(item.video)} has label {int(bad[0])} but {store.root / MANIFEST} lists {n} "
            f"class_names (allowed labels: {allowed}, or -1 for unlabelled); add the missing names to "
            f"`class_names` in the manifest, or extract the video again: {store.redo([item.video])}"
        )


def check_tools(item: VideoFeatures, store: FeatureStore) -> None:
    """Refuse tool labels other than 0/1 on an annotated frame, or -1 (not annotated) on every tool of one."""
    check_label_rows(item, store, item.tools, "tool")


def check_label_rows(item: VideoFeatures, store: FeatureStore, rows: np.ndarray | None, what: str) -> None:
    """Refuse multi-label rows (`what`: tool, triplet) other than 0/1 on an annotated frame, or not -1 on
    every column of a frame that is not annotated.

    Why: a frame with a -1 is left out of the multi-label probe, so a damaged label would drop frames unseen.
    """
    if rows is None:
        return
    rows = np.asarray(rows)
    unannotated = (rows == -1).all(axis=1, keepdims=True)
    bad = np.argwhere(~(unannotated | (rows == 0) | (rows == 1)))
    if len(bad):
        frame, column = (int(i) for i in bad[0])
        raise FeatureStoreError(
            f"{store.path(item.video)} (video {item.video!r}) has {what} label {int(rows[frame, column])} at "
            f"frame {frame}, {what} {column}: {what} labels are 0/1, or -1 on every {what} of a frame that "
            f"is not annotated; extract the video again: {store.redo([item.video])}"
        )


def check_soft_rows(item: VideoFeatures, store: FeatureStore, rows: np.ndarray | None, what: str) -> None:
    """Refuse soft label rows (`what`: CVS) outside [0, 1] on a rated frame, or not NaN on every column of a
    frame that is not rated. Why: as `check_label_rows`, a damaged row would drop or skew frames unseen."""
    if rows is None:
        return
    rows = np.asarray(rows, dtype=np.float64)
    unrated = np.isnan(rows).all(axis=1, keepdims=True)
    bad = np.argwhere(~(unrated | ((rows >= 0) & (rows <= 1))))
    if len(bad):
        frame, column = (int(i) for i in bad[0])
        raise FeatureStoreError(
            f"{store.path(item.video)} (video {item.video!r}) has {what} value {rows[frame, column]:g} at "
            f"frame {frame}, column {column}: {what} values are fractions in [0, 1], or NaN on every column "
            f"of a frame that is not rated; extract the video again: {store.redo([item.video])}"
        )


def load_videos(store: FeatureStore, videos: Sequence[str]) -> list[VideoFeatures]:
    """Read and check videos of a store: finite features, some labelled frames, labels named by the manifest.

    Why: every evaluation protocol (k-NN, linear, CV) reads its frames through here, so it checks once.
    """
    class_names = store.class_names
    items = store.read_many(videos)
    for item in items:
        check_video(item, store)
        check_labels(item, store, class_names)
    return items


def stack_labelled(items: Sequence[VideoFeatures]) -> tuple[np.ndarray, np.ndarray]:
    """Labelled frames of several videos as (features [N, D], labels [N])."""
    if not items:
        return np.zeros((0, 0), np.float32), np.zeros(0, np.int64)
    feats = np.concatenate([it.features[it.labels >= 0] for it in items]).astype(np.float32, copy=False)
    labels = np.concatenate([it.labels[it.labels >= 0] for it in items]).astype(np.int64)
    return feats, labels


def class_name(class_id: int, class_names: Sequence[str]) -> str:
    """The name of a class id, or the id itself when the manifest does not name it."""
    return class_names[class_id] if 0 <= class_id < len(class_names) else str(class_id)


def list_videos(videos: Sequence[str], limit: int = 5) -> str:
    """`a, b, c` or `a, b, c, ... (12 videos)`: names for a one-line message."""
    shown = ", ".join(videos[:limit])
    return shown if len(videos) <= limit else f"{shown}, ... ({len(videos)} videos)"


def require_two_classes(labels: np.ndarray, class_names: Sequence[str], what: str, fix: str) -> None:
    """Refuse training frames of fewer than two classes: one line naming `what` they come from and the `fix`.

    Why: a probe trained on one class predicts it everywhere and scores 100 on a one-class test set.
    """
    present = np.unique(labels)
    if len(present) < 2:
        found = (
            f"only one class ({class_name(int(present[0]), class_names)!r})" if len(present) else "no class"
        )
        raise EvaluationError(
            f"{what} has labelled frames of {found}, so a probe would predict it for every frame; {fix}."
        )


def used_ks(requested: Sequence[int], n_train: int, where: str = "") -> list[int]:
    """The k each requested k uses over `n_train` training frames (``clamp_k``); warns for each clamped."""
    used = [clamp_k(k, n_train) for k in requested]
    for asked, k in zip(requested, used, strict=True):
        if k != asked:
            logger.warning("%sk=%d > %d training frames: using k=%d", where, asked, n_train, k)
    return used


def warn_unseen(train_labels: np.ndarray, test: Sequence[VideoFeatures], class_names: Sequence[str]) -> None:
    """Warn, per test video, about classes that no training frame has (they cannot be predicted)."""
    seen = set(np.unique(train_labels).tolist())
    for item in test:
        unseen = sorted(set(np.unique(item.labels[item.labels >= 0]).tolist()) - seen)
        if unseen:
            names = [class_name(c, class_names) for c in unseen]
            logger.warning(
                "Video %r has classes %s that no training frame has; they cannot be predicted.",
                item.video,
                names,
            )


def phase_classes(class_names: Sequence[str]) -> Callable[[VideoFeatures], list[str]]:
    """The classes of a video's labelled frames, by name: what a training subset must cover (phases)."""
    return lambda item: [class_name(int(c), class_names) for c in np.unique(item.labels[item.labels >= 0])]


def take_subset(
    items: Sequence[VideoFeatures],
    draw: SubsetDraw | None,
    classes_of: Callable[[VideoFeatures], list[str]],
) -> list[VideoFeatures]:
    """The training videos of `draw`'s subset (protocols/fractions.py), in their order; all when None.

    Why here: every protocol restricts its training videos (after any validation hold-out) the same way,
    while validation and test videos stay as they are.
    """
    if draw is None:
        return list(items)
    chosen = set(draw.take({item.video: classes_of(item) for item in items}).videos)
    return [item for item in items if item.video in chosen]


def store_context(store: FeatureStore) -> tuple[dict[str, Any], list[str], int, list[int]]:
    """Manifest, class names, class count (>= 1) and background class ids of a store."""
    manifest = store.manifest
    class_names = list(manifest.get("class_names", []))
    return manifest, class_names, max(len(class_names), 1), background_ids(manifest, class_names)


def store_relaxed_spec(store: FeatureStore, class_names: Sequence[str]) -> RelaxedSpec:
    """Relaxed-metric settings from a store's manifest (dataset, fps), checked before any model runs."""
    manifest = store.manifest
    fix = (
        f'{store.root / MANIFEST} must record "fps" (frames per second of the stored labels); '
        "re-extract the store with plstitch extract"
    )
    return relaxed_spec(manifest.get("dataset"), class_names, manifest.get("fps"), fps_fix=fix)


def require_videos(videos: Sequence[str], split: str, store: FeatureStore) -> None:
    """Refuse an empty split, naming the store's manifest."""
    if not videos:
        raise EvaluationError(
            f"{store.root}/manifest.json has no videos in split {split!r}; record splits at extraction."
        )


def load_train_val_test(
    store: FeatureStore, scheme: str | None, val_fraction: float, seed: int, draw: SubsetDraw | None = None
) -> tuple[dict[str, list[str]], str, tuple[list[VideoFeatures], list[VideoFeatures], list[VideoFeatures]]]:
    """Splits, where validation came from, and the checked train/val/test videos of a trained probe.

    Why: the linear and temporal protocols share these rules - validation videos held out of train **by
    video** when the store records no val split, two or more training classes, unseen test classes warned.
    """
    class_names = store_context(store)[1]
    splits = resolve_splits(store, scheme)
    require_videos(splits["train"], "train", store)
    require_videos(splits["test"], "test", store)
    validation = "official"
    what = f"Training split 'train' of {store.root}"
    fix = f"record videos of two or more classes in it ({store.root / MANIFEST})"
    if not splits["val"]:
        splits["train"], splits["val"] = holdout_by_video(splits["train"], val_fraction, seed)
        validation = f"held out by video ({val_fraction:.0%} of train, seed {seed})"
        what = f"{what}, less the videos held out for validation ({list_videos(splits['val'])}),"
        fix = f"{fix}, or record a 'val' split there, or lower --val-fraction"
    train, val, test = (load_videos(store, splits[s]) for s in ("train", "val", "test"))
    train = take_subset(train, draw, phase_classes(class_names))
    if draw is not None:
        drawn = list_videos([item.video for item in train])
        what = f"{what} at --train-fraction {draw.fraction:g} (seed {draw.seed}: {drawn})"
        fix = f"{fix}, or raise --train-fraction"
    train_labels = stack_labelled(train)[1]
    require_two_classes(train_labels, class_names, what, fix)
    warn_unseen(train_labels, test, class_names)
    return splits, validation, (train, val, test)
