"""`toy-centroid`: nearest class mean, a plstitch evaluation protocol from another package.

Each test frame gets the class whose mean training feature is nearest (Euclidean), optionally after L2
normalisation. Registered at import (`register_protocol`), so `plstitch protocols` lists it,
`plstitch cv --protocol toy-centroid` cross-validates it (`cv=`), `plstitch benchmark --protocols
toy-centroid` runs it as a cell (`run=`), and `[protocols.toy-centroid] normalize = true` (benchmark/cv
`--config`) or `cv --set normalize=true` set its one field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.protocols import (
    CvFit,
    Fold,
    Protocol,
    build_results,
    load_videos,
    register_protocol,
    resolve_splits,
    score_videos,
    stack_labelled,
    store_context,
)
from plstitch_eval.protocols.registry import config_record, numbers_only
from plstitch_eval.store.features import FeatureStore, VideoFeatures

NAME = "toy-centroid"


@dataclass
class CentroidConfig:
    """The protocol's settings (its CLI option group): L2-normalise features before taking class means."""

    normalize: bool = False


def centroid_predict(
    train: Sequence[VideoFeatures], test: Sequence[VideoFeatures], num_classes: int, config: CentroidConfig
) -> dict[str, np.ndarray]:
    """video -> predicted class per frame: the nearest mean of the labelled training frames of a class."""
    x, y = stack_labelled(train)
    prep = (lambda f: f / np.linalg.norm(f, axis=1, keepdims=True)) if config.normalize else (lambda f: f)
    x = prep(x)
    centres = np.stack(
        [x[y == c].mean(0) if (y == c).any() else np.zeros(x.shape[1]) for c in range(num_classes)]
    )
    present = np.isin(np.arange(num_classes), y)  # a class without training frames is never predicted
    preds = {}
    for item in test:
        dist = ((prep(item.features)[:, None, :] - centres[None]) ** 2).sum(-1)
        preds[item.video] = np.where(present[None], dist, np.inf).argmin(1)
    return preds


def fit_fold(fold: Fold, config: CentroidConfig, progress: bool) -> tuple[dict[str, np.ndarray], dict]:
    """One cross-validation fold (`plstitch cv`): predictions on the fold's test videos, one extra record."""
    preds = centroid_predict(fold.train, fold.test, fold.num_classes, config)
    return preds, {"classes_seen": int(len(np.unique(fold.train_labels)))}


def run(features: str | Path, config: Any, scheme: str | None) -> dict[str, Any]:
    """One benchmark cell: fit on the store's train (+ val) videos, score its test videos."""
    own = TOY_CENTROID.config_of(config)
    store = FeatureStore(features)
    manifest, class_names, num_classes, background = store_context(store)
    splits = resolve_splits(store, scheme)
    train = load_videos(store, splits["train"] + splits["val"])
    test = load_videos(store, splits["test"])
    preds = centroid_predict(train, test, num_classes, own)
    scored = score_videos(preds, {item.video: item.labels for item in test}, num_classes, background)
    protocol = {"name": NAME, **config_record(own)}
    return build_results(NAME, manifest, features, protocol, splits, class_names, scored, preds)


TOY_CENTROID = register_protocol(
    Protocol(
        name=NAME,
        label="centroid",  # table column label
        title="Nearest class mean",  # model-card metric title
        config_type=CentroidConfig,
        run=run,
        cv=CvFit(fit_fold, holds_out_val=False),  # it chooses nothing on validation videos
        settings=lambda config: {NAME: numbers_only(TOY_CENTROID.config_of(config))},
    )
)
