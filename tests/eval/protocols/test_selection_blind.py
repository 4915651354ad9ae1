"""Selection never sees test labels, for every registered protocol (issue 54, item 1).

Generated over the registry, so a protocol is covered when it registers: every benchmark cell (`Protocol.run`)
and every cross-validation fold fit (`Protocol.cv`) is run on one store, then on copies of it whose test
labels, or validation labels, are permuted. Test labels must move the test metrics and nothing else (not the
choice, not a validation figure, not a prediction); validation labels must move what the protocol says it
chooses (`Protocol.chooses`), so the first guard cannot pass vacuously. The reported metrics are checked
against the test predictions scored here by hand, on a store whose training frames are far cleaner than its
test frames (metrics taken on the wrong frames cannot agree).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from plstitch_eval.protocols.registry import (
    CV_TASK,
    Fold,
    Protocol,
    cv_protocols,
    get_protocol,
    registered_protocols,
)
from plstitch_eval.store.features import FeatureStore
from tests.eval.protocols.stores import CLASSES, CellConfig, permuted_copy, write_store

RUNS = [p.name for p in registered_protocols() if p.run is not None]
# a CV's test videos train its other folds: checked per fold below
BLIND_RUNS = [name for name in RUNS if name != CV_TASK]
CHOOSERS = [name for name in BLIND_RUNS if get_protocol(name).chooses]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FeatureStore]:
    root = tmp_path_factory.mktemp("selection")
    store = write_store(root / "store")
    return {
        "store": store,
        "test": permuted_copy(store, root / "test-permuted", "test"),
        "val": permuted_copy(store, root / "val-permuted", "val"),
    }


_RUN_CACHE: dict[tuple[str, str], dict[str, Any]] = {}


def run_cell(name: str, stores: dict[str, FeatureStore], which: str) -> dict[str, Any]:
    """`name`'s benchmark cell on one of the stores (each run once per module)."""
    key = (name, which)
    if key not in _RUN_CACHE:
        _RUN_CACHE[key] = get_protocol(name).run(stores[which].root, CellConfig(), None)
    return _RUN_CACHE[key]


def choice(protocol: Protocol, record: dict[str, Any]) -> dict[str, Any]:
    return {key: record[key] for key in protocol.chooses}


def test_every_protocol_that_records_validation_scores_names_its_choice(
    stores: dict[str, FeatureStore],
) -> None:
    """A protocol that scores candidates on validation must say what it chooses, or the guards skip it."""
    for name in BLIND_RUNS:
        protocol = get_protocol(name)
        record = run_cell(name, stores, "store")["protocol"]
        if "val_scores" in record:
            assert protocol.chooses, f"{name} records val_scores but names no choice (Protocol.chooses)"
        assert set(protocol.chooses) <= set(record), f"{name}: {protocol.chooses} not all in its record"


@pytest.mark.parametrize("name", BLIND_RUNS)
def test_test_labels_move_the_test_metrics_and_nothing_else(
    name: str, stores: dict[str, FeatureStore]
) -> None:
    before, after = run_cell(name, stores, "store"), run_cell(name, stores, "test")
    assert after["protocol"] == before["protocol"]  # settings, the choice, every validation figure
    assert after["predictions"] == before["predictions"]
    assert after["metrics"] != before["metrics"]
    assert after["per_video"] != before["per_video"]


@pytest.mark.parametrize("name", CHOOSERS)
def test_validation_labels_move_the_choice(name: str, stores: dict[str, FeatureStore]) -> None:
    protocol = get_protocol(name)
    before, after = run_cell(name, stores, "store"), run_cell(name, stores, "val")
    assert after["protocol"]["val_scores"] != before["protocol"]["val_scores"]
    assert choice(protocol, after["protocol"]) != choice(protocol, before["protocol"])


def _fold(store: FeatureStore, index: int = 0) -> Fold:
    splits = store.manifest["splits"]
    train, val, test = (store.read_many(splits[s]) for s in ("train", "val", "test"))
    train_labels = np.concatenate([it.labels for it in train])
    return Fold(index, train, val, test, len(CLASSES), [], train_labels)


@pytest.mark.parametrize("name", cv_protocols())
def test_a_cv_fold_chooses_blind_to_its_test_videos(name: str, stores: dict[str, FeatureStore]) -> None:
    """A fold's fit gets its test videos with labels (the Fold holds them); it may use only their features."""
    protocol = get_protocol(name)
    config = protocol.config_of(CellConfig())
    preds, extras = protocol.cv.fit(_fold(stores["store"]), config, False)
    preds_t, extras_t = protocol.cv.fit(_fold(stores["test"]), config, False)
    assert extras_t == extras
    assert preds_t.keys() == preds.keys()
    for video, predicted in preds.items():
        np.testing.assert_array_equal(preds_t[video], predicted)
    if protocol.chooses and protocol.cv.holds_out_val:
        _, extras_v = protocol.cv.fit(_fold(stores["val"]), config, False)
        assert extras_v["val_scores"] != extras["val_scores"]
        assert choice(protocol, extras_v) != choice(protocol, extras)


@pytest.mark.parametrize("name", cv_protocols())
def test_cv_reports_each_fold_blind_to_that_folds_test_labels(
    name: str, stores: dict[str, FeatureStore], tmp_path: Path
) -> None:
    """`run_cv` end to end: relabelling fold 0's test videos leaves fold 0's choice, validation figures and
    predictions as they were, and moves its metrics (the other folds train on those videos, so they move)."""
    from plstitch_eval.protocols.cv import run_cv

    config = get_protocol(name).config_of(CellConfig())
    before = run_cv(stores["store"].root, folds=3, protocol=name, config=config)
    tested = before["folds"][0]["test"]
    relabelled = permuted_copy(stores["store"], tmp_path / "fold0", tested)
    after = run_cv(relabelled.root, folds=3, protocol=name, config=config)
    unscored = lambda fold: {k: v for k, v in fold.items() if k != "metrics"}  # noqa: E731
    assert unscored(after["folds"][0]) == unscored(before["folds"][0])
    assert {v: after["predictions"][v] for v in tested} == {v: before["predictions"][v] for v in tested}
    assert after["folds"][0]["metrics"] != before["folds"][0]["metrics"]


# --- the reported metrics are the test predictions scored (by hand here) ---------------------------------


def accuracy(pred: np.ndarray, labels: np.ndarray) -> float:
    keep = labels >= 0
    return 100.0 * float(np.mean(np.asarray(pred)[keep] == labels[keep]))


def average_precision(scores: np.ndarray, positives: np.ndarray) -> float:
    """AP (%) as the sum over distinct score thresholds, high to low, of (recall step) x precision there."""
    order = np.argsort(-scores, kind="stable")
    scores, positives = scores[order], positives[order].astype(float)
    last_of_each = np.r_[np.flatnonzero(np.diff(scores)), len(scores) - 1]
    tp = np.cumsum(positives)[last_of_each]
    precision = tp / (last_of_each + 1)
    recall = tp / positives.sum()
    return 100.0 * float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def _check_phase_metrics(results: dict[str, Any], store: FeatureStore, videos: list[str]) -> None:
    labels = {v: store.read(v).labels for v in videos}
    pooled_pred = np.concatenate([np.asarray(results["predictions"][v]) for v in videos])
    pooled_true = np.concatenate([labels[v] for v in videos])
    assert results["metrics"]["accuracy"] == pytest.approx(accuracy(pooled_pred, pooled_true), abs=1e-6)
    for video in videos:
        by_hand = accuracy(np.asarray(results["predictions"][video]), labels[video])
        assert results["per_video"][video]["accuracy"] == pytest.approx(by_hand, abs=1e-6)


def _check_tool_metrics(results: dict[str, Any], store: FeatureStore, videos: list[str]) -> None:
    tools = []
    for video in videos:
        rows = store.read(video).tools
        tools.append(rows[(rows >= 0).all(axis=1)])
    targets = np.concatenate(tools)
    scores = np.concatenate([np.asarray(results["predictions"][v], dtype=np.float64) for v in videos])
    aps = [average_precision(scores[:, j], targets[:, j]) for j in range(targets.shape[1])]
    assert results["metrics"]["mAP"] == pytest.approx(float(np.mean(aps)), abs=0.5)  # scores kept to 4 places


@pytest.mark.parametrize("name", RUNS)
def test_reported_metrics_are_the_test_predictions_scored(name: str, stores: dict[str, FeatureStore]) -> None:
    store = stores["store"]
    results = run_cell(name, stores, "store")
    check = _check_tool_metrics if "mAP" in results["metrics"] else _check_phase_metrics
    if results["task"] != CV_TASK:
        check(results, store, store.manifest["splits"]["test"])
        return
    for fold in results["folds"]:  # each fold scored on its own test videos; the CV reports their mean
        check({**results, "metrics": fold["metrics"]}, store, fold["test"])
    accs = [f["metrics"]["accuracy"] for f in results["folds"]]
    assert results["metrics"]["accuracy"] == pytest.approx(float(np.mean(accs)))
