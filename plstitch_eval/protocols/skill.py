"""The `skill` task's heads: ridge regression of one score per video on its mean-pooled frozen features
(`plstitch linear --task skill`, `plstitch cv --task skill --folds loso|louo|K`), or the temporal skill head
over its frame features (`temporal_head`: `plstitch temporal --task skill`, `cv --protocol temporal`), on the
same folds, scored the same way beside the same reference rows.

Each video becomes one row, the mean of its frames' features; the rows are standardised with the training
videos' statistics and fitted by scikit-learn's `RidgeCV`, whose alpha is chosen among `ALPHAS` by the
leave-one-out error over the training videos only (its closed form), so the held-out videos never choose
it. Scored by Spearman's rho and MAE (`metrics/skill.py`) beside the task's two reference rows; the results
JSON holds every held-out video's prediction, so each figure can be recomputed from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import RidgeCV
from sklearn.preprocessing import StandardScaler

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.metrics.skill import TRIAL_NAME, loso_folds, louo_folds
from plstitch_eval.protocols.fractions import SubsetDraw, TrainFraction, over_subsets
from plstitch_eval.protocols.registry import CV_TASK
from plstitch_eval.results_json import results_record
from plstitch_eval.splits import cv_videos, kfold_by_video, resolve_splits
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import get_task
from plstitch_eval.tasks.skill import (
    DEFAULT_SCORE,
    METRICS,
    check_scored,
    duration_s,
    references,
    score,
    video_scores,
)
from plstitch_eval.temporal.skill_head import SkillHeadConfig, fit_skill_head

ALPHAS = tuple(float(10.0**k) for k in range(-2, 7))  # 0.01 ... 1e6, a decade apart
JIGSAWS_FOLDS = {"loso": loso_folds, "louo": louo_folds}


@dataclass(frozen=True)
class SkillData:
    """What a skill run reads off a store: each video's score, mean-pooled features and duration (s), and
    with `keep_frames` its frame features (the temporal head's input)."""

    root: str
    manifest: dict[str, Any]
    score_name: str
    scores: dict[str, float]
    pooled: dict[str, np.ndarray]
    durations: dict[str, float]
    frames: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        store: FeatureStore,
        videos: Sequence[str],
        score_name: str = DEFAULT_SCORE,
        keep_frames: bool = False,
    ) -> SkillData:
        """Read `videos` (scores checked before any feature file is read)."""
        manifest, root = store.manifest, str(store.root)
        scores = video_scores(manifest, root, score_name)
        check_scored(videos, scores, root)
        pooled, durations, frames = {}, {}, {}
        for item in store.read_many(videos):
            if len(item.features) < 2 or not np.isfinite(item.features).all():  # no frame labels needed
                raise EvaluationError(
                    f"Video {item.video!r} of {root} has fewer than 2 frames or NaN/inf features; extract it "
                    f"again: {store.redo([item.video])}"
                )
            pooled[item.video] = item.features.astype(np.float64).mean(axis=0)
            durations[item.video] = duration_s(item.frame_times)
            if keep_frames:
                frames[item.video] = item.features
        return cls(root, manifest, score_name, scores, pooled, durations, frames)


def fit_ridge(rows: np.ndarray, targets: np.ndarray) -> tuple[StandardScaler, RidgeCV]:
    """Standardise `rows` with their own statistics, then ridge with alpha chosen by leave-one-out error."""
    scaler = StandardScaler().fit(rows)
    return scaler, RidgeCV(alphas=ALPHAS).fit(scaler.transform(rows), targets)


def ridge_predictions(
    data: SkillData, train: Sequence[str], test: Sequence[str]
) -> tuple[dict[str, float], float]:
    """({test video: predicted score}, the chosen alpha) of a ridge fitted on the `train` videos."""
    if len(train) < 3:
        raise ConfigError(
            f"{data.root}: the skill head needs at least 3 training videos (alpha is chosen by leave-one-out "
            f"over them), got {len(train)}; extract more videos or use fewer folds."
        )
    scaler, model = fit_ridge(
        np.stack([data.pooled[v] for v in train]), np.array([data.scores[v] for v in train])
    )
    predicted = model.predict(scaler.transform(np.stack([data.pooled[v] for v in test])))
    return {v: float(p) for v, p in zip(test, predicted, strict=True)}, float(model.alpha_)


def _scored(data: SkillData, predicted: dict[str, float]) -> dict[str, Any]:
    """Metrics and per-video rows of `predicted` against the store's scores."""
    per_video = {
        v: {"predicted": p, "score": data.scores[v], "abs_error": abs(p - data.scores[v])}
        for v, p in predicted.items()
    }
    metrics = score(predicted, data.scores)
    note = {"note": metrics.pop("note")} if "note" in metrics else {}
    return {"metrics": metrics, "per_video": per_video, "predictions": predicted, **note}


def _reference_rows(data: SkillData, train: Sequence[str], test: Sequence[str]) -> dict[str, dict[str, Any]]:
    rows = references(train, test, data.scores, data.durations)
    return {name: {"description": text, **_scored(data, preds)} for name, (text, preds) in rows.items()}


@dataclass(frozen=True)
class SkillHead:
    """One way to predict held-out videos' scores from the training videos: the protocol it is (`linear`:
    the ridge; `temporal`: `temporal/skill_head.py`), what the results' protocol records of it, whether it
    reads the frame features, and `predict(data, train, test) -> ({test video: score}, what it chose)`."""

    protocol: str
    record: dict[str, Any]
    predict: Callable[[SkillData, Sequence[str], Sequence[str]], tuple[dict[str, float], dict[str, Any]]]
    frames: bool = False


def _ridge(data: SkillData, train: Sequence[str], test: Sequence[str]) -> tuple[dict[str, float], dict]:
    predicted, alpha = ridge_predictions(data, train, test)
    return predicted, {"chosen_alpha": alpha}


RIDGE = SkillHead(
    "linear",
    {
        "head": "ridge",
        "pooling": "mean over frames",
        "standardize": True,
        "alphas": list(ALPHAS),
        "select_metric": "ridge alpha by leave-one-out error on the training videos",
    },
    _ridge,
)


def temporal_head(config: SkillHeadConfig | None = None) -> SkillHead:
    """The temporal skill head with `config` (its defaults when None) as a `SkillHead`."""
    config = config or SkillHeadConfig()

    def predict(data: SkillData, train: Sequence[str], test: Sequence[str]) -> tuple[dict[str, float], dict]:
        fit = fit_skill_head([data.frames[v] for v in train], [data.scores[v] for v in train], config)
        predicted = fit.predict([data.frames[v] for v in test])
        return {v: float(p) for v, p in zip(test, predicted, strict=True)}, {
            "final_loss": fit.train_losses[-1]
        }

    record = {
        "head": "temporal conv (MS-TCN dilated layers over features and their frame differences)",
        **asdict(config),
        "standardize": True,
        "select_metric": f"none: fixed {config.epochs} epochs, no validation videos",
    }
    return SkillHead("temporal", record, predict, frames=True)


def _protocol(data: SkillData, name: str, head: SkillHead, **more: Any) -> dict[str, Any]:
    return {"name": name, "task": "skill", "score": data.score_name, **head.record, **more}


def train_subset(train: Sequence[str], draw: SubsetDraw | None) -> list[str]:
    """The training videos `draw` keeps (`protocols/fractions.py`'s nested rule; a skill video brings no
    class, so the seeded ranking of the names alone decides), in their order; all when None."""
    if draw is None:
        return list(train)
    chosen = set(draw.take({video: () for video in train}).videos)
    return [video for video in train if video in chosen]


def run_skill_linear(
    features: str | Path,
    score_name: str = DEFAULT_SCORE,
    scheme: str | None = None,
    head: SkillHead = RIDGE,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """The store's split scheme: `head` (the ridge) fitted on its train (and val) videos, scored on its test
    videos (results task `linear-skill`, or `temporal-skill` with the temporal head). `train_fraction`: on
    subsets of the training videos, one per seed, mean ± std over them (references on the same subsets)."""
    store = FeatureStore(features)
    splits = resolve_splits(store, scheme)
    train, test = splits["train"] + splits["val"], splits["test"]
    if not test:
        raise ConfigError(
            f"{store.root}/manifest.json's split{f' scheme {scheme!r}' if scheme else ''} has no test "
            "videos; pick another --split-scheme, or cross-validate: plstitch cv --task skill --folds K."
        )
    data = SkillData.of(store, train + test, score_name, keep_frames=head.frames)
    task = get_task("skill").results_task(head.protocol)

    def run(draw: SubsetDraw | None) -> dict[str, Any]:
        used = train_subset(train, draw)
        predicted, chosen = head.predict(data, used, test)
        scored = _scored(data, predicted)
        protocol = _protocol(data, task, head, **chosen, fit_on=["train", "val"], videos={"train": len(used)})
        results = results_record(
            task, data.manifest, features, protocol, splits, [score_name],
            headline=list(METRICS), metrics=scored["metrics"], per_video=scored["per_video"],
            predictions=predicted,
        )  # fmt: skip
        results["references"] = _reference_rows(data, used, test)
        if "note" in scored:
            results["note"] = scored["note"]
        return results

    return over_subsets(run, train_fraction)


def skill_folds(videos: Sequence[str], folds: str, seed: int, root: str) -> list[dict[str, Any]]:
    """JIGSAWS' LOSO / LOUO folds from the trial names, or K seeded folds by video (`folds` a number)."""
    if folds in JIGSAWS_FOLDS:
        odd = [v for v in videos if not TRIAL_NAME.match(v)]
        if odd:
            raise ConfigError(
                f"--folds {folds}: {root}'s videos are not JIGSAWS trials (e.g. {odd[0]!r}, not "
                f"<Task>_<user><trial> like Suturing_B001); pass a number of folds by video, e.g. --folds 5."
            )
        return [
            {"name": f["name"], "train": f["train"], "test": f["test"]} for f in JIGSAWS_FOLDS[folds](videos)
        ]
    try:
        count = int(folds)
    except ValueError:
        raise ConfigError(f"--folds must be loso, louo or a number of folds, got {folds!r}.") from None
    parts = kfold_by_video(videos, count, seed)
    return [
        {"name": f"fold-{i}", "train": [v for v in videos if v not in set(part)], "test": part}
        for i, part in enumerate(parts)
    ]


def _over_folds(data: SkillData, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and std over folds (rho: over the folds where it is defined) and the pooled held-out videos'."""
    out: dict[str, Any] = {"metrics": {}, "metrics_std": {}}
    for metric in METRICS:
        values = [b["metrics"][metric] for b in blocks if b["metrics"][metric] is not None]
        out["metrics"][metric] = float(np.mean(values)) if values else None
        out["metrics_std"][metric] = float(np.std(values)) if values else None
    pooled = score({v: p for b in blocks for v, p in b["predictions"].items()}, data.scores)
    out["metrics"].update({f"{m}_pooled": pooled[m] for m in METRICS})
    notes = sorted({b["note"] for b in blocks if "note" in b})
    return {**out, "note": f"per fold: {'; '.join(notes)}"} if notes else out


def run_skill_cv(
    features: str | Path,
    folds: str = "louo",
    score_name: str = DEFAULT_SCORE,
    seed: int = 0,
    head: SkillHead = RIDGE,
    train_fraction: TrainFraction | None = None,
) -> dict[str, Any]:
    """`head` (the ridge) cross-validated over `folds` (every video held out once): mean ± std over folds,
    pooled too; the reference rows on the same folds. `train_fraction`: each fold's training videos cut to
    that fraction, one subset per seed and fold, mean ± std over the seeds."""
    store = FeatureStore(features)
    videos = cv_videos(store)
    chosen = skill_folds(videos, folds, seed, str(store.root))
    data = SkillData.of(store, videos, score_name, keep_frames=head.frames)
    return over_subsets(lambda draw: _cv(data, features, chosen, folds, seed, head, draw), train_fraction)


def _cv(
    data: SkillData, features: str | Path, chosen: list[dict[str, Any]], folds: str, seed: int,
    head: SkillHead, draw: SubsetDraw | None,
) -> dict[str, Any]:  # fmt: skip
    fold_blocks, reference_blocks = [], {}
    for fold in chosen:
        train = train_subset(fold["train"], draw)
        predicted, picked = head.predict(data, train, fold["test"])
        fold_blocks.append({**fold, "train": train, "chosen": picked, **_scored(data, predicted)})
        for name, block in _reference_rows(data, train, fold["test"]).items():
            reference_blocks.setdefault(name, {"description": block["description"], "folds": []})
            reference_blocks[name]["folds"].append(block)
    summary = _over_folds(data, fold_blocks)
    refs = {
        name: {"description": ref["description"], **_over_folds(data, ref["folds"])}
        for name, ref in reference_blocks.items()
    }
    inner = get_task("skill").results_task(head.protocol)
    task = f"{CV_TASK}-{inner}"
    protocol = _protocol(data, task, head, inner=inner, folds=folds, seed=seed)
    results = results_record(
        task, data.manifest, features, protocol, {"folds": [f["test"] for f in chosen]}, [data.score_name],
        headline=[*METRICS, *(f"{m}_pooled" for m in METRICS)], metrics=summary["metrics"],
        per_video={v: row for b in fold_blocks for v, row in b["per_video"].items()},
        predictions={v: p for b in fold_blocks for v, p in b["predictions"].items()},
    )  # fmt: skip
    results["metrics_std"] = summary["metrics_std"]
    results["folds"] = [
        {"fold": b["name"], "test": b["test"], **b["chosen"], "metrics": b["metrics"]} for b in fold_blocks
    ]
    results["references"] = refs
    return results
