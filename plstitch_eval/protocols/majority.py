"""The majority-class reference: the most frequent training class predicted for every test frame.

Why: the accuracy an encoder must beat to count (the `majority` row of quickstart and reproduce tables).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.protocols.data import load_videos, require_videos, stack_labelled, store_context
from plstitch_eval.protocols.registry import Protocol, register_protocol
from plstitch_eval.splits import resolve_splits
from plstitch_eval.store.features import FeatureStore

TASK = "majority"


def run_majority(
    features: str | Path, scheme: str | None = None, train_on: Sequence[str] = ("train",)
) -> dict[str, Any]:
    """Majority-class reference: the most frequent labelled class of the `train_on` splits predicted for
    every labelled test frame (ties: lowest class id). Why: the accuracy an encoder must beat to count.
    """
    store = FeatureStore(features)
    manifest, class_names, n_classes, _ = store_context(store)
    splits = resolve_splits(store, scheme)
    train_videos = [v for s in train_on for v in splits[s]]
    require_videos(train_videos, "train", store)
    require_videos(splits["test"], "test", store)
    train_labels = stack_labelled(load_videos(store, train_videos))[1]
    test_labels = stack_labelled(load_videos(store, splits["test"]))[1]
    majority = int(np.bincount(train_labels, minlength=n_classes).argmax())
    return {
        "task": TASK,
        "dataset": manifest.get("dataset"),
        "features": str(features),
        "train_splits": list(train_on),
        "class_id": majority,
        "class_name": class_names[majority] if majority < len(class_names) else str(majority),
        "train_frames": int(len(train_labels)),
        "test_frames": int(len(test_labels)),
        "metrics": {"accuracy": 100.0 * float(np.mean(test_labels == majority))},
    }


# a reference row, not a benchmark cell or a CV protocol: registered for its name only
PROTOCOL = register_protocol(Protocol(name=TASK, label=TASK, title=TASK))
