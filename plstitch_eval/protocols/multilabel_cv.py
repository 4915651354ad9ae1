"""Cross-validation by video of a multi-label task (`plstitch cv --task tools|triplets|cvs`).

The folds are the phase CV's (`splits.kfold_by_video` over every video of the store's splits, seeded), or
`official`: one per split scheme the store records under a `crossval-` name (CholecT45's five folds, as
cholect50 / cholect45 stores record them): the scheme's test videos are the fold's test, its train and val
videos the rest. Each fold holds validation videos out of the rest by video (`holdout_by_video`, seed +
fold), fits the single-split protocol's head on the loaded videos (the linear probe's `multilabel.fit_loaded`,
class-balanced; the MS-TCN's `temporal_multilabel.fit_loaded`) and scores its test videos with the task's own
`MultiLabel.score` (triplets: the six ivtmetrics mAPs). Metrics are the mean and std over folds; the results'
`predictions` hold every test video's stored probabilities, so each fold's figures can be recomputed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.metrics.triplets import defined_means
from plstitch_eval.protocols import multilabel, temporal_multilabel
from plstitch_eval.protocols.cv import check_fold_holdout
from plstitch_eval.protocols.data import take_subset
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, over_subsets
from plstitch_eval.protocols.multilabel import (
    Scored,
    label_names,
    load_labelled,
    multilabel_spec,
    shown_classes,
)
from plstitch_eval.protocols.registry import CV_TASK, config_record
from plstitch_eval.results_json import results_record
from plstitch_eval.splits import cv_videos, holdout_by_video, kfold_by_video, resolve_splits
from plstitch_eval.store.features import MANIFEST, FeatureStore, VideoFeatures
from plstitch_eval.tasks.registry import Task, get_task
from plstitch_eval.temporal.fit import TemporalConfig

OFFICIAL = "official"  # `--folds official`: the store's crossval-* split schemes
CROSSVAL = "crossval-"
Parts = dict[str, list[VideoFeatures]]


@dataclass(frozen=True)
class CvFold:
    """One fold: its name (`fold-0`, or the scheme's `crossval-1`), its test videos, and the videos it
    trains on (validation videos are held out of them)."""

    name: str
    test: list[str]
    rest: list[str]


def crossval_schemes(store: FeatureStore) -> list[str]:
    """The split schemes the store records whose name starts with `crossval-`, in fold order (by number)."""
    manifest = store.manifest
    nested = {k for k, v in (manifest.get("splits") or {}).items() if isinstance(v, dict)}
    names = {str(n) for n in (*(manifest.get("split_schemes") or {}), *nested) if str(n).startswith(CROSSVAL)}
    return sorted(names, key=_fold_number)


def _fold_number(name: str) -> tuple[int, str]:
    """`crossval-2` before `crossval-10`; a name without a number after those numbered."""
    suffix = name.removeprefix(CROSSVAL)
    return (int(suffix) if suffix.isdigit() else 1 << 30, name)


def official_folds(store: FeatureStore) -> list[CvFold]:
    """One fold per recorded `crossval-*` scheme; one line when the store records none, or a scheme without
    test videos, or two schemes testing the same video (each video is tested once)."""
    schemes, where = crossval_schemes(store), store.root / MANIFEST
    if not schemes:
        raise ConfigError(
            f"--folds official: {where} records no crossval-* split scheme (those of a store extracted from "
            "cholect50 or cholect45: crossval-1 ... crossval-5); pass a number of folds by video instead, "
            "e.g. --folds 5."
        )
    folds, tested = [], {}
    for name in schemes:
        splits = resolve_splits(store, name)
        if not splits["test"]:
            raise ConfigError(f"--folds official: split scheme {name!r} of {where} records no test videos.")
        for video in splits["test"]:
            if video in tested:
                raise ConfigError(
                    f"--folds official: split schemes {tested[video]!r} and {name!r} of {where} both test "
                    f"video {video!r}; official folds test each video once (pass --folds K instead)."
                )
            tested[video] = name
        folds.append(CvFold(name, sorted(splits["test"]), [*splits["train"], *splits["val"]]))
    return folds


def video_folds(store: FeatureStore, folds: int, seed: int) -> list[CvFold]:
    """`folds` seeded folds by video over every video of the store's splits (its videos if none)."""
    videos = cv_videos(store)
    return [
        CvFold(f"fold-{i}", test, [v for v in videos if v not in set(test)])
        for i, test in enumerate(kfold_by_video(videos, folds, seed))
    ]


def fold_mean_std(records: Sequence[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """Per metric (those of the first fold), the mean and std (ddof 0, as the phase CV's) over the folds
    where it is defined (not None or NaN: a label without positives there); NaN where no fold has it."""
    keys = list(records[0])
    table = np.array([[np.nan if r.get(k) is None else float(r[k]) for k in keys] for r in records])
    mean = defined_means(table)
    std = np.sqrt(defined_means((table - mean) ** 2))
    return dict(zip(keys, map(float, mean), strict=True)), dict(zip(keys, map(float, std), strict=True))


FoldFit = Callable[[Task, list[str], Parts, Any, bool, str], tuple[Scored, dict[str, Any]]]


def _linear_fold(
    task: Task, names: list[str], parts: Parts, config: LinearConfig, progress: bool, where: str
) -> tuple[Scored, dict[str, Any]]:
    fit = multilabel.fit_loaded(task, names, parts, config, progress, where)
    return (fit.metrics, fit.per_video, fit.predictions), {**fit.choice(), "frames": fit.frames}


def _temporal_fold(
    task: Task, names: list[str], parts: Parts, config: TemporalConfig, progress: bool, where: str
) -> tuple[Scored, dict[str, Any]]:
    parts = temporal_multilabel.annotated_parts(parts, multilabel_spec(task), where)
    fit, scored = temporal_multilabel.fit_loaded(task, names, parts, config, progress)
    return scored, {"chosen_epoch": fit.best_epoch, "val_scores": fit.val_scores}


FOLD_FITS: dict[str, FoldFit] = {"linear": _linear_fold, "temporal": _temporal_fold}
DEFAULT_CONFIGS: dict[str, Callable[[], Any]] = {
    "linear": partial(LinearConfig, balance_classes=True),  # as `plstitch linear --task` fits it
    "temporal": TemporalConfig,
}


def run_multilabel_cv(
    task: str | Task,
    features: str | Path,
    head: str = "linear",
    config: Any = None,
    folds: int | str = 5,
    seed: int = 0,
    val_fraction: float = 0.2,
    progress: bool = False,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """`head` (linear or temporal, with its `config`; None: its default, the linear one class-balanced)
    cross-validated on the multi-label `task` over `folds` (a number, or `official`): mean ± std over folds,
    each fold's record (its videos, metrics, choice and validation scores), every test video's predictions.

    `train_fraction`: each fold trains on subsets of its training videos (after its validation hold-out),
    one per seed, test folds unchanged (protocols/fractions.py).
    """
    task = get_task(task) if isinstance(task, str) else task
    multilabel_spec(task)
    if head not in FOLD_FITS:
        raise ConfigError(
            f"--protocol {head}: cv --task {task.name} fits a linear or temporal multi-label head (there is "
            "no k-NN multi-label head); use --protocol linear or temporal."
        )
    config = config or DEFAULT_CONFIGS[head]()
    run = partial(_run_cv, task, features, head, config, folds, seed, val_fraction, progress)
    return over_subsets(run, train_fraction)


def _run_cv(
    task: Task, features: str | Path, head: str, config: Any, folds: int | str, seed: int,
    val_fraction: float, progress: bool, draw: SubsetDraw | None,
) -> dict[str, Any]:  # fmt: skip
    spec, store = multilabel_spec(task), FeatureStore(features)
    names = label_names(store, task)
    plan = official_folds(store) if folds == OFFICIAL else video_folds(store, int(folds), seed)
    videos = sorted({v for fold in plan for v in (*fold.test, *fold.rest)})
    check_fold_holdout(videos, [fold.test for fold in plan], val_fraction, head, knn=False)
    items = {it.video: it for it in load_labelled(store, videos, "CV", spec)}
    records, per_video, predictions = [], {}, {}
    for i, fold in enumerate(plan):
        train_v, val_v = holdout_by_video(fold.rest, val_fraction, seed + i)
        parts = {"train": [items[v] for v in train_v], "val": [items[v] for v in val_v]}
        parts["train"] = take_subset(parts["train"], draw, shown_classes(names, spec))
        parts["test"] = [items[v] for v in fold.test]
        where = f"CV fold {fold.name} of {store.root}"
        (metrics, own, probs), choice = FOLD_FITS[head](task, names, parts, config, progress, where)
        trained = [it.video for it in parts["train"]]
        records.append(
            {"fold": i, "name": fold.name, "test": fold.test, "train": trained, "val": val_v,
             "metrics": metrics, **choice}
        )  # fmt: skip
        per_video.update(own)
        predictions.update(probs)
    metrics, metrics_std = fold_mean_std([r["metrics"] for r in records])
    protocol = {
        "name": CV_TASK,
        "inner": task.results_task(head),
        "head": head,
        "task": task.name,
        "folds": folds if folds == OFFICIAL else int(folds),
        "fold_seed": seed,
        "validation": f"held out by video ({val_fraction:.0%} of each fold's training videos, seed "
        f"{seed} + fold)",
        "select_metric": task.select_metric,
        **config_record(config),
    }
    results = results_record(
        f"{CV_TASK}-{task.results_task(head)}", store.manifest, features, protocol,
        {"folds": [fold.test for fold in plan]}, names, headline=list(task.metrics), metrics=metrics,
        per_video=per_video, predictions=predictions,  # each test video's probabilities, annotated frames
    )  # fmt: skip
    results["metrics_std"] = metrics_std
    results["folds"] = records
    return results
