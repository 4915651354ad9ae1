"""Tool presence on frozen features (Cholec80's second task): a multi-label linear probe scored by per-tool
average precision and their mean (mAP), as SelfSupSurg, LEMON and SurgeNet report it.

The probe is one logistic per tool, class-balanced (positives weighted by negatives / positives of that tool,
as `BCEWithLogitsLoss(pos_weight=...)`), trained as a grid of learning rates x weight decays in one pass
with the phase probe's `linear.GridTraining` (the same standardisation, initialisation, batches, optimiser
step and cosine schedule); the head with the best validation mAP is reported on the test frames, pooled over
videos.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sklearn.metrics import average_precision_score

from plstitch_eval.errors import EvaluationError
from plstitch_eval.linear_grid import GridTraining, LinearConfig, LinearGrid
from plstitch_eval.protocols.data import check_tools, take_subset
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, fraction_of, over_subsets
from plstitch_eval.protocols.registry import Protocol, numbers_only, register_protocol
from plstitch_eval.results_json import results_record
from plstitch_eval.splits import check_holdout, holdout_by_video, resolve_splits
from plstitch_eval.store.features import MANIFEST, FeatureStore, VideoFeatures
from plstitch_eval.utils.device import resolve_device, torch_threads

TOOLS_TASK = "linear-tools"  # the results task of tool presence (multi-label linear probe, AP / mAP)
MAP = "mAP"


def ap_key(tool: str) -> str:
    """The metric name of one tool's average precision, e.g. `AP_Grasper`."""
    return f"AP_{tool}"


def tool_frames(items: list[VideoFeatures]) -> tuple[np.ndarray, np.ndarray]:
    """(features [N, D], targets [N, K]) of the frames whose tool row is fully annotated (no -1)."""
    feats, targets = [], []
    for item in items:
        if item.tools is None:
            continue
        keep = (item.tools >= 0).all(axis=1)
        feats.append(item.features[keep])
        targets.append(item.tools[keep])
    if not feats:
        return np.zeros((0, 0), np.float32), np.zeros((0, 0), np.int8)
    return np.concatenate(feats).astype(np.float32), np.concatenate(targets).astype(np.int8)


def positive_weights(targets: np.ndarray) -> np.ndarray:
    """Per-tool weight of a positive frame: negatives / positives (1 for a tool lacking either)."""
    pos = targets.sum(0).astype(np.float64)
    neg = len(targets) - pos
    return np.where((pos > 0) & (neg > 0), neg / np.maximum(pos, 1), 1.0)


def multilabel_grad(logits: torch.Tensor, targets: torch.Tensor, pos_weight: torch.Tensor) -> torch.Tensor:
    """d/dlogits of the mean class-balanced binary cross-entropy over frames and tools (closed form):
    ``(pos_weight * y * (sigmoid - 1) + (1 - y) * sigmoid) / (N * K)``; logits [N, ..., K], targets [N, K]."""
    y = targets.view(len(targets), *([1] * (logits.dim() - 2)), -1)
    prob = torch.sigmoid(logits)
    grad = pos_weight * y * (prob - 1.0) + (1.0 - y) * prob
    return grad / (len(targets) * targets.shape[-1])


def train_multilabel_grid(
    features: np.ndarray, targets: np.ndarray, config: LinearConfig | None = None, progress: bool = False
) -> LinearGrid:
    """Train every (lr, wd) head of `config` together on features [N, D] and 0/1 targets [N, K].

    `progress`: a bar over the steps on stderr, as the phase probe's (plain lines every few seconds when
    stderr is a file; muted by --quiet).
    """
    config = config or LinearConfig()
    features = np.asarray(features, dtype=np.float32)
    targets = np.asarray(targets, dtype=np.float32)
    if len(features) == 0 or len(features) != len(targets):
        raise EvaluationError(
            f"The tool probe needs one target row per training frame and at least one frame "
            f"(got {len(features)} frames, {len(targets)} target rows)."
        )
    if not np.isfinite(features).all():
        raise EvaluationError("Training features contain NaN or inf; re-extract them.")
    device = resolve_device(config.device)
    with torch_threads(config.num_threads):
        return _train(features, targets, config, device, progress)


def _train(
    features: np.ndarray,
    targets: np.ndarray,
    config: LinearConfig,
    device: torch.device,
    progress: bool = False,
) -> LinearGrid:
    run = GridTraining.start(features, targets.shape[1], config, device)
    y_all = torch.from_numpy(targets).to(device)
    pos_weight = torch.from_numpy(positive_weights(targets)).float().to(device)
    if not config.balance_classes:
        pos_weight = torch.ones_like(pos_weight)
    return run.train(
        lambda logits, idx: multilabel_grad(logits, y_all[idx], pos_weight),
        f"tool probe ({run.num_heads} heads)",
        progress,
    )


def average_precisions(scores: np.ndarray, targets: np.ndarray) -> list[float | None]:
    """Average precision (%) of each column of `scores` [N, K] against 0/1 `targets`; None for a tool with
    no positive frame (its AP is undefined)."""
    return [
        float(average_precision_score(targets[:, j], scores[:, j]) * 100.0) if targets[:, j].any() else None
        for j in range(targets.shape[1])
    ]


def mean_ap(aps: list[float | None]) -> float:
    """Mean over the tools whose AP is defined (NaN when none is)."""
    defined = [a for a in aps if a is not None]
    return float(np.mean(defined)) if defined else float("nan")


def sigmoid(logits: np.ndarray) -> np.ndarray:
    """Presence probabilities of logits (numerically stable)."""
    return 0.5 * (1.0 + np.tanh(0.5 * logits))


def _store_tools(store: FeatureStore) -> list[str]:
    names = list(store.manifest.get("tool_names") or [])
    if not names:
        raise EvaluationError(
            f"{store.root / MANIFEST} records no tool names: its dataset has no tool annotations "
            "(--task tools needs Cholec80 with tool_annotations/, or the synthetic dataset)."
        )
    return names


def _load(store: FeatureStore, videos: list[str], what: str) -> list[VideoFeatures]:
    items = store.read_many(videos)
    for item in items:
        check_tools(item, store)
    lacking = [it.video for it in items if it.tools is None]
    if lacking:
        named = ", ".join(lacking[:5]) + (" ..." if len(lacking) > 5 else "")
        raise EvaluationError(
            f"{what} videos {named} of {store.root} have no "
            "tool labels (extracted before tool labels were kept, or their tool file was missing); extract "
            "them again with plstitch extract --overwrite."
        )
    return items


def run_tool_linear(
    features: str | Path,
    config: LinearConfig | None = None,
    scheme: str | None = None,
    val_fraction: float = 0.2,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """Tool-presence protocol: the grid on train, the head of best validation mAP, AP per tool on test.

    `progress`: the grid's bar on stderr (`plstitch linear --task tools`; a benchmark cell runs without).
    `train_fraction`: the grid on subsets of the training videos, one per seed (protocols/fractions.py);
    a subset covers the tools (a tool counts in a video with a frame showing it) as a phase subset the phases.
    """
    run = partial(_run_tool_linear, features, config, scheme, val_fraction, progress)
    return over_subsets(run, train_fraction)


def tool_classes(tools: list[str]) -> Callable[[VideoFeatures], list[str]]:
    """The tools a video shows in some annotated frame, by name: what a training subset must cover."""

    def shown(item: VideoFeatures) -> list[str]:
        if item.tools is None:
            return []
        return [tool for tool, on in zip(tools, (item.tools == 1).any(0), strict=True) if on]

    return shown


def _run_tool_linear(
    features: str | Path,
    config: LinearConfig | None,
    scheme: str | None,
    val_fraction: float,
    progress: bool,
    draw: SubsetDraw | None,
) -> dict[str, Any]:
    config = config or LinearConfig(balance_classes=True)
    store = FeatureStore(features)
    tools = _store_tools(store)
    check_holdout(store, scheme, val_fraction, "the tool probe chooses its head")
    splits = resolve_splits(store, scheme)
    validation = "official"
    if not splits["val"]:
        splits["train"], splits["val"] = holdout_by_video(splits["train"], val_fraction, config.seed)
        validation = f"held out by video ({val_fraction:.0%} of train, seed {config.seed})"
    parts = {s: _load(store, splits[s], s) for s in ("train", "val", "test")}
    parts["train"] = take_subset(parts["train"], draw, tool_classes(tools))
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = (tool_frames(parts[s]) for s in ("train", "val", "test"))
    for name, rows in (("train", x_tr), ("val", x_va), ("test", x_te)):
        if not len(rows):
            raise EvaluationError(f"The {name} split of {store.root} has no tool-annotated frames.")
    grid = train_multilabel_grid(x_tr, y_tr, config, progress)
    val_maps = [mean_ap(average_precisions(sigmoid(z), y_va)) for z in grid.logits(x_va)]
    best = int(np.nanargmax(val_maps)) if not np.isnan(val_maps).all() else 0
    scores = sigmoid(grid.logits(x_te, best))
    aps = average_precisions(scores, y_te)
    metrics: dict[str, Any] = {MAP: mean_ap(aps), **{ap_key(t): a for t, a in zip(tools, aps, strict=True)}}
    per_video, predictions = {}, {}
    for item in parts["test"]:
        x, y = tool_frames([item])
        if len(x):
            video_scores = sigmoid(grid.logits(x, best))
            per_video[item.video] = {MAP: mean_ap(average_precisions(video_scores, y))}
            predictions[item.video] = np.round(video_scores, 4).tolist()
    lr, wd = grid.heads[best]
    protocol = {
        "name": TOOLS_TASK,
        **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "select_metric": MAP,  # the head is chosen on validation mAP, whatever the phase probe's setting
        "validation": validation,
        "chosen_lr": lr,
        "chosen_weight_decay": wd,
        "val_scores": {f"lr={a:g},wd={b:g}": s for (a, b), s in zip(grid.heads, val_maps, strict=True)},
        "frames": {"train": len(x_tr), "val": len(x_va), "test": len(x_te)},
        "tools_without_positives": [t for t, a in zip(tools, aps, strict=True) if a is None],
    }
    return results_record(
        TOOLS_TASK,
        store.manifest,
        features,
        protocol,
        splits,
        tools,
        headline=[MAP],
        metrics=metrics,
        per_video=per_video,
        predictions=predictions,  # presence probabilities of each test video's annotated frames
    )


def _benchmark_run(store: str | Path, config: Any, scheme: str | None) -> dict[str, Any]:
    balanced = replace(config.linear, balance_classes=True)
    return run_tool_linear(
        store, balanced, scheme=scheme, val_fraction=config.val_fraction, train_fraction=fraction_of(config)
    )


def _settings(config: Any) -> dict[str, Any]:  # the linear grid, class-balanced per tool, chosen on mAP
    return {
        "linear": {**numbers_only(config.linear), "balance_classes": True, "select_metric": MAP},
        "val_fraction": config.val_fraction,
    }


PROTOCOL = register_protocol(
    Protocol(
        name=TOOLS_TASK,
        label="linear (tools)",
        title="Tool presence (linear probe, AP)",
        config_type=LinearConfig,
        section="linear",
        run=_benchmark_run,
        settings=_settings,
        table_metrics=lambda _phase_metrics: (MAP,),  # its results have no phase metrics
        chooses=("chosen_lr", "chosen_weight_decay"),
    )
)
