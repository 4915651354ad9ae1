"""Stores and hand-written references for the regression-task tests (anticipation, rsd, a toy task).

Stores: `write_store`'s copies with other frame times (`retimed_copy`: a slower frame rate, a missing
stretch), one without tool labels (`write_store_without_tools`), and ones whose features encode the remaining
time or the video's duration (`write_duration_store`). References: the targets and metrics written here with
plain loops from the papers' definitions (docs/metrics.md), not with the library's vectorised code.
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from plstitch_eval.store.features import FeatureStore, VideoFeatures
from tests.eval.protocols.stores import CLASSES, write_store


# ------------------------------------------------------------------------------------------------- stores
def retimed_copy(store: FeatureStore, root: Path, times: Callable[[np.ndarray], np.ndarray]) -> FeatureStore:
    """A copy of `store` whose every video's frame times (seconds) are `times(old times)`: same features,
    labels and tools."""
    shutil.copytree(store.root, root)
    copy = FeatureStore(root)
    for video in copy.videos():
        item = copy.read(video)
        new = np.asarray(times(np.asarray(item.frame_times, np.float64)), np.float64)
        copy.write(VideoFeatures(video, item.features, item.labels, new, item.tools))
    return copy


def write_store_without_tools(root: Path, seed: int = 0) -> FeatureStore:
    """`write_store`'s videos without tool labels, under a manifest that records no tool_names."""
    full = write_store(root.with_name(root.name + "-with-tools"), seed)
    store = FeatureStore.create(root, {k: v for k, v in full.manifest.items() if k != "tool_names"})
    for video in full.videos():
        item = full.read(video)
        store.write(VideoFeatures(video, item.features, item.labels, item.frame_times))
    return store


def write_duration_store(
    root: Path, encode: str, step_s: float = 6.0, seed: int = 0, noise: float = 0.05
) -> FeatureStore:
    """Videos of 15-60 frames every `step_s` seconds (1.5-6 minutes at 6 s); feature column 0 is each frame's
    remaining minutes (`encode="remaining"`) or the video's duration in minutes on every frame
    (`encode="duration"`), plus `noise`; columns 1-5 are noise. Official train (8) / val (3) / test (3)."""
    rng = np.random.default_rng(seed)
    splits: dict[str, list[str]] = {}
    store_items = []
    for split, count in {"train": 8, "val": 3, "test": 3}.items():
        splits[split] = [f"{split}{i}" for i in range(count)]
        for name in splits[split]:
            n = int(rng.integers(15, 61))
            times = np.arange(n, dtype=np.float64) * step_s
            remaining = rsd_targets(times)
            column = np.asarray(remaining if encode == "remaining" else [remaining[0]] * n)
            feats = rng.normal(size=(n, 6))
            feats[:, 0] = column + noise * rng.normal(size=n)
            labels = np.minimum(np.arange(n) * len(CLASSES) // n, len(CLASSES) - 1).astype(np.int64)
            store_items.append(VideoFeatures(name, feats.astype(np.float32), labels, times))
    manifest = {
        "dataset": f"{encode}-test",
        "class_names": CLASSES,
        "splits": splits,
        "background_classes": [],
        "model": {"spec": "tiny-test-encoder", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0 / step_s,
    }
    store = FeatureStore.create(root, manifest)
    for item in store_items:
        store.write(item)
    return store


# ---------------------------------------------------------------------------------- targets, with loops
def presence_rows(item: VideoFeatures, classes: int, tools: bool) -> list[list[bool]]:
    """Per frame: phase c shown (label == c) for each class, then each tool shown (== 1) where `tools`."""
    rows = []
    for f in range(len(item.labels)):
        row = [int(item.labels[f]) == c for c in range(classes)]
        if tools:
            row += [int(v) == 1 for v in item.tools[f]]
        rows.append(row)
    return rows


def anticipation_targets(present: Sequence[Sequence[bool]], times: Sequence[float], horizon: float):
    """Minutes from each frame to the next frame (itself included) showing each output, by the frame times,
    at most `horizon`; `horizon` when it does not occur again. Frames x outputs, a list of lists."""
    out = []
    for f in range(len(present)):
        row = []
        for c in range(len(present[f])):
            minutes = horizon
            for g in range(f, len(present)):
                if present[g][c]:
                    minutes = min((float(times[g]) - float(times[f])) / 60.0, horizon)
                    break
            row.append(minutes)
        out.append(row)
    return out


def frame_count_anticipation_targets(present: Sequence[Sequence[bool]], fps: float, horizon: float):
    """The targets a frame count would give (frames / fps), blind to gaps in the frame times."""
    return anticipation_targets(present, [f / fps for f in range(len(present))], horizon)


def rsd_targets(times: Sequence[float]) -> list[float]:
    """RSDNet's remaining minutes: (last frame time + the median frame step - frame time) / 60."""
    steps = [float(times[i + 1]) - float(times[i]) for i in range(len(times) - 1)]
    end = float(times[-1]) + statistics.median(steps)
    return [(end - float(t)) / 60.0 for t in times]


# ---------------------------------------------------------------------------------- metrics, with loops
def mean_or_none(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def class_maes(
    preds: Sequence[Sequence[float]], truths: Sequence[Sequence[float]], column: int, horizon: float
) -> dict[str, float | None]:
    """One output's outMAE (target == h), inMAE (0 < target < h) and wMAE (their mean) over the frames."""
    out = [abs(p[column] - t[column]) for p, t in zip(preds, truths, strict=True) if t[column] == horizon]
    inside = [
        abs(p[column] - t[column]) for p, t in zip(preds, truths, strict=True) if 0 < t[column] < horizon
    ]
    out_mae, in_mae = mean_or_none(out), mean_or_none(inside)
    both = None if out_mae is None or in_mae is None else (out_mae + in_mae) / 2
    return {"outMAE": out_mae, "inMAE": in_mae, "wMAE": both}


def group_means(
    preds: Sequence[Sequence[float]],
    truths: Sequence[Sequence[float]],
    columns: Sequence[int],
    horizon: float,
    plain: bool = False,
) -> dict[str, float | None]:
    """The mean over a group's outputs of each MAE: over the outputs where it is defined (None where none
    is: the results' figures), or with `plain` test_scores.py's np.mean (None as soon as one is undefined)."""
    per_class = [class_maes(preds, truths, c, horizon) for c in columns]
    means = {}
    for metric in ("wMAE", "outMAE", "inMAE"):
        values = [row[metric] for row in per_class]
        defined = [v for v in values if v is not None]
        if plain:
            means[metric] = None if len(defined) < len(values) else sum(values) / len(values)
        else:
            means[metric] = mean_or_none(defined)
    return means


def select_wmae(preds: Sequence[Sequence[float]], truths: Sequence[Sequence[float]], horizon: float) -> float:
    """The figure an anticipation head is chosen on: the mean wMAE over every output where it is defined."""
    values = [class_maes(preds, truths, c, horizon)["wMAE"] for c in range(len(truths[0]))]
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else float("inf")


def rsd_maes(preds: Sequence[float], truths: Sequence[float]) -> dict[str, float | None]:
    """MAE over all frames and over the frames whose remaining time is at most 2 and 5 minutes."""
    pairs = list(zip(preds, truths, strict=True))
    return {
        "MAE": mean_or_none([abs(p - t) for p, t in pairs]),
        "MAE_last_2min": mean_or_none([abs(p - t) for p, t in pairs if t <= 2.0]),
        "MAE_last_5min": mean_or_none([abs(p - t) for p, t in pairs if t <= 5.0]),
    }
