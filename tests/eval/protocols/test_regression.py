"""The regression heads (`protocols/regression.py`) on anticipation and remaining surgery duration (rsd).

Every number is checked against a formulation written here with plain loops (`regression_stores`): the
targets from the store's labels, tools and frame times, the pooled metrics from the predictions, the k-NN
regression from a brute-force neighbour search, the reference rows from their definitions. The results JSON
holds predictions rounded to 4 decimals: metrics recomputed from them agree to 5e-5 (half a unit of the last
decimal); recomputed from the unrounded predictions (the fitted head's, or the brute-force k-NN's) they agree
to 1e-6 (the targets are float32 in minutes).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols.regression import (
    fit_linear_regression,
    knn_regress,
    run_knn_regression,
    run_linear_regression,
)
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import StoreInfo, TaskSettings, get_task
from tests.eval.protocols.regression_stores import (
    anticipation_targets,
    class_maes,
    frame_count_anticipation_targets,
    group_means,
    presence_rows,
    retimed_copy,
    rsd_maes,
    rsd_targets,
    select_wmae,
    write_duration_store,
)
from tests.eval.protocols.stores import CLASSES, TOOLS, permuted_copy, write_store

HORIZON = 0.5  # minutes: the 1-fps store's videos last 25-40 s
LINEAR = LinearConfig(lrs=(0.01, 0.1, 1.0), weight_decays=(0.0, 0.1), epochs=6, batch_size=64, device="cpu")
ROUNDED = 5.01e-5  # metrics from predictions rounded to 4 decimals
FLOAT32 = 1e-6  # metrics from unrounded predictions against float32 targets
PHASES = list(range(len(CLASSES)))
TOOL_COLUMNS = list(range(len(CLASSES), len(CLASSES) + len(TOOLS)))
GAP_S, GAP_AT = 40.0, 12  # the gapped store misses 40 s before its 13th frame


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, FeatureStore]:
    root = tmp_path_factory.mktemp("regression")
    store = write_store(root / "store")
    return {
        "store": store,
        "slow": retimed_copy(store, root / "slow", lambda t: t * 6.0),  # a frame every 6 s: 2.5-4 min
        "gapped": retimed_copy(store, root / "gapped", lambda t: np.where(t >= GAP_AT, t + GAP_S, t)),
        "test-permuted": permuted_copy(store, root / "test-permuted", "test"),
        "val-permuted": permuted_copy(store, root / "val-permuted", "val"),
    }


@pytest.fixture(scope="module")
def anticipation(stores) -> tuple[dict, object, object]:
    """The linear head on anticipation (phases and tools): results, the fitted regressor, the task data."""
    return fit_linear_regression(stores["store"].root, "anticipation", TaskSettings(HORIZON), LINEAR)


# ------------------------------------------------------------------------------------------------ helpers
def truth_of(store: FeatureStore, video: str, horizon: float) -> list[list[float]]:
    item = store.read(video)
    return anticipation_targets(presence_rows(item, len(CLASSES), tools=True), item.frame_times, horizon)


def stacked(store: FeatureStore, videos, preds_of, horizon: float):
    """Predictions and hand-made anticipation targets of `videos`, their frames stacked (pooled)."""
    preds, truths = [], []
    for video in videos:
        preds += [list(map(float, row)) for row in preds_of(video)]
        truths += truth_of(store, video, horizon)
    return preds, truths


def assert_close(reported: dict, expected: dict, tolerance: float) -> None:
    for key, value in expected.items():
        if value is None:
            assert reported[key] is None, key
        else:
            assert reported[key] == pytest.approx(value, abs=tolerance), key


def anticipation_metrics(preds, truths, horizon: float) -> dict[str, float | None]:
    phases = group_means(preds, truths, PHASES, horizon)
    tools = group_means(preds, truths, TOOL_COLUMNS, horizon)
    return {
        **{f"phase_{k}": v for k, v in phases.items()},
        **{f"tool_{k}": v for k, v in tools.items()},
    }


def brute_knn(bank, targets, queries, k: int, temperature: float = 0.07, weighting: str = "exp"):
    """Each query's weighted mean of its k most cosine-similar bank rows' targets, by loops."""
    bank, queries = np.asarray(bank, np.float64), np.asarray(queries, np.float64)
    unit = [row / math.sqrt(sum(v * v for v in row)) for row in bank]
    out = []
    for query in queries:
        q = query / math.sqrt(sum(v * v for v in query))
        sims = [float(sum(a * b for a, b in zip(q, row, strict=True))) for row in unit]
        nearest = sorted(range(len(bank)), key=lambda i: -sims[i])[: min(k, len(bank))]
        if weighting == "exp":
            weights = [math.exp(sims[i] / temperature) for i in nearest]
        elif weighting == "similarity":
            weights = [sims[i] for i in nearest]
        else:
            weights = [1.0] * len(nearest)
        if sum(weights) <= 0:
            weights = [1.0] * len(nearest)
        total = sum(weights)
        columns = len(targets[0])
        out.append(
            [sum(w * float(targets[i][o]) for w, i in zip(weights, nearest, strict=True)) / total
             for o in range(columns)]
        )  # fmt: skip
    return np.asarray(out)


def train_bank(store: FeatureStore, target_of):
    """The training split's features and targets, stacked in split order."""
    bank, targets = [], []
    for video in store.splits()["train"]:
        item = store.read(video)
        bank.append(item.features)
        targets += target_of(item)
    return np.concatenate(bank), targets


# ------------------------------------------------------------------------- targets and metrics, recomputed
def test_anticipation_targets_and_pooled_metrics_are_recomputed_from_the_predictions(
    stores, anticipation
) -> None:
    results, regressor, _ = anticipation
    store = stores["store"]
    test = store.splits()["test"]
    assert sorted(results["predictions"]) == test
    assert results["protocol"]["outputs"] == CLASSES + TOOLS
    unrounded = {v: np.clip(regressor.predict(store.read(v).features), 0.0, HORIZON) for v in test}
    for video in test:
        np.testing.assert_allclose(results["predictions"][video], np.round(unrounded[video], 4), atol=1e-12)

    preds, truths = stacked(store, test, lambda v: unrounded[v], HORIZON)
    expected = anticipation_metrics(preds, truths, HORIZON)
    assert all(expected[f"phase_{m}"] is not None for m in ("wMAE", "inMAE", "outMAE"))
    assert_close(results["metrics"], expected, FLOAT32)
    rounded, _ = stacked(store, test, lambda v: results["predictions"][v], HORIZON)
    assert_close(results["metrics"], anticipation_metrics(rounded, truths, HORIZON), ROUNDED + FLOAT32)

    for video in test:  # each video's own, and the per-class block
        own_preds, own_truths = stacked(store, [video], lambda v: unrounded[v], HORIZON)
        own = group_means(own_preds, own_truths, PHASES, HORIZON)
        assert_close(results["per_video"][video], {f"phase_{k}": v for k, v in own.items()}, FLOAT32)
    for group, columns in (("phases", PHASES), ("tools", TOOL_COLUMNS)):  # test_scores.py's plain mean
        plain = group_means(preds, truths, columns, HORIZON, plain=True)
        assert_close(results["per_class"][group]["reference_mean"], plain, FLOAT32)
        counts = [class_maes(preds, truths, c, HORIZON)["wMAE"] is not None for c in columns]
        assert results["per_class"][group]["defined"]["wMAE"] == sum(counts)
    pooled = results["per_class"]["phases"]["pooled"]
    assert results["per_class"]["phases"]["classes"] == CLASSES
    for c in PHASES:
        assert pooled["inMAE"][c] == pytest.approx(
            sum(abs(p[c] - t[c]) for p, t in zip(preds, truths, strict=True) if 0 < t[c] < HORIZON)
            / sum(1 for t in truths if 0 < t[c] < HORIZON),
            abs=FLOAT32,
        )


def test_knn_rsd_predictions_targets_and_metrics_are_recomputed(stores) -> None:
    store = stores["slow"]  # 2.5-4 minute videos: the last 2 minutes are some of the frames, not all
    config = KnnConfig(k=20)
    results = run_knn_regression(store.root, "rsd", TaskSettings(), config)
    assert results["task"] == "knn-rsd" and results["protocol"]["k_used"] == 20
    bank, targets = train_bank(store, lambda item: [[t] for t in rsd_targets(item.frame_times)])
    preds, rounded, truths = [], [], []
    for video in store.splits()["test"]:
        item = store.read(video)
        brute = brute_knn(bank, targets, item.features, 20)[:, 0]
        assert (brute >= 0).all()
        np.testing.assert_allclose(results["predictions"][video], brute, atol=ROUNDED + 1e-6)
        preds += brute.tolist()
        rounded += results["predictions"][video]
        truths += rsd_targets(item.frame_times)
    expected = rsd_maes(preds, truths)
    assert 0 < sum(t <= 2.0 for t in truths) < len(truths)  # the last-2-minutes subset is a proper one
    assert expected["MAE_last_2min"] != pytest.approx(expected["MAE"], abs=1e-3)
    assert_close(results["metrics"], expected, 1e-6)
    assert_close(results["metrics"], rsd_maes(rounded, truths), ROUNDED)


# ----------------------------------------------------------------------------------------------- k-NN head
@pytest.mark.parametrize(
    ("k", "weighting", "backend"),
    [(5, "exp", "faiss"), (5, "exp", "torch"), (7, "uniform", "auto"), (4, "similarity", "auto"),
     (500, "exp", "auto")],
)  # fmt: skip
def test_knn_regress_is_the_weighted_mean_of_the_nearest_targets(k, weighting, backend) -> None:
    rng = np.random.default_rng(k)
    bank = rng.normal(size=(60, 8)).astype(np.float32)
    targets = rng.uniform(0, 5, size=(60, 3))
    queries = rng.normal(size=(25, 8)).astype(np.float32)
    config = KnnConfig(k=k, temperature=0.1, weighting=weighting, device="cpu", backend=backend)
    got = knn_regress(bank, targets, queries, config)
    expected = brute_knn(bank, targets, queries, k, 0.1, weighting)
    assert got.shape == (25, 3)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    if k >= len(bank) and weighting == "exp":  # every training frame: not its nearest few
        assert not np.allclose(got, brute_knn(bank, targets, queries, 5, 0.1))


# --------------------------------------------------------------------------------------------- linear head
def test_the_linear_head_chosen_is_the_argmin_of_the_validation_figures(stores, anticipation) -> None:
    results, regressor, _ = anticipation
    store, protocol = stores["store"], results["protocol"]
    scores = protocol["val_scores"]
    assert len(scores) == len(LINEAR.lrs) * len(LINEAR.weight_decays)
    best = min(scores, key=scores.get)
    lr, wd = (float(x) for x in re.fullmatch(r"lr=(.+),wd=(.+)", best).groups())
    assert (protocol["chosen_lr"], protocol["chosen_weight_decay"]) == (lr, wd)
    assert protocol["target_scale_min"] == HORIZON
    val = store.splits()["val"]
    for head, ((a, b), reported) in enumerate(zip(regressor.grid.heads, scores.values(), strict=True)):
        assert f"lr={a:g},wd={b:g}" in scores
        preds_of = lambda v, h=head: np.clip(regressor.predict(store.read(v).features, h), 0, HORIZON)  # noqa: E731
        preds, truths = stacked(store, val, preds_of, HORIZON)
        assert reported == pytest.approx(select_wmae(preds, truths, HORIZON), abs=FLOAT32)


def test_linear_predictions_are_clipped_to_the_tasks_bounds(stores, anticipation, tmp_path: Path) -> None:
    results, regressor, _ = anticipation
    store = stores["store"]
    raw = np.concatenate([regressor.predict(store.read(v).features) for v in results["predictions"]])
    assert raw.min() < 0 or raw.max() > HORIZON  # the head alone leaves the bounds: clipping is exercised
    values = np.concatenate([np.asarray(p) for p in results["predictions"].values()])
    assert values.min() >= 0 and values.max() <= HORIZON

    # test videos whose features say a minute less remains than the head learned: below 0 near their end
    remaining = write_duration_store(tmp_path / "remaining", "remaining")
    for video in remaining.splits()["test"]:
        item = remaining.read(video)
        item.features[:, 0] -= 1.0
        remaining.write(item)
    config = LinearConfig(lrs=(0.03, 0.1), weight_decays=(0.0,), epochs=20, batch_size=32, device="cpu")
    rsd, fitted, _ = fit_linear_regression(remaining.root, "rsd", TaskSettings(), config)
    for video, preds in rsd["predictions"].items():
        raw = fitted.predict(remaining.read(video).features)[:, 0]
        assert raw.min() < 0  # the unclipped head goes below 0 in every test video
        np.testing.assert_allclose(preds, np.round(np.maximum(raw, 0.0), 4), atol=1e-12)
    assert all(isinstance(p, float) for p in rsd["predictions"]["test0"])  # one value per frame
    train = [t for v in remaining.splits()["train"] for t in rsd_targets(remaining.read(v).frame_times)]
    assert rsd["protocol"]["target_scale_min"] == pytest.approx(max(train), abs=1e-12)  # longest target


# -------------------------------------------------------------------------------- selection blind to test
def test_selection_is_blind_to_test_labels_and_sees_validation_labels(stores, anticipation) -> None:
    results = anticipation[0]
    settings = TaskSettings(HORIZON)
    blind = run_linear_regression(stores["test-permuted"].root, "anticipation", settings, LINEAR)
    assert blind["protocol"] == results["protocol"]  # chosen lr / wd and every validation figure
    assert blind["predictions"] == results["predictions"]
    assert blind["metrics"]["phase_wMAE"] != pytest.approx(results["metrics"]["phase_wMAE"], abs=1e-3)
    assert blind["metrics"]["phase_inMAE"] != pytest.approx(results["metrics"]["phase_inMAE"], abs=1e-3)

    seen = run_linear_regression(stores["val-permuted"].root, "anticipation", settings, LINEAR)
    old, new = results["protocol"]["val_scores"], seen["protocol"]["val_scores"]
    assert old.keys() == new.keys()
    assert all(new[key] != pytest.approx(old[key], abs=1e-6) for key in old)


# ------------------------------------------------------------------------------------------------- references
@pytest.mark.parametrize("name", ["slow", "gapped"])
def test_the_rsd_references_are_their_definitions(stores, name: str) -> None:
    store = stores[name]
    results = run_knn_regression(store.root, "rsd", TaskSettings(), KnnConfig(k=5))
    train = [store.read(v) for v in store.splits()["train"]]
    durations = [rsd_targets(item.frame_times)[0] + item.frame_times[0] / 60.0 for item in train]
    mean_duration = sum(durations) / len(durations)
    naive, at_elapsed, truths = [], [], []
    bins: dict[int, list[float]] = {}
    for item in train:  # 0.1-minute bins of elapsed time: [k / 10, (k + 1) / 10)
        for time, target in zip(item.frame_times, rsd_targets(item.frame_times), strict=True):
            bins.setdefault(math.floor(time / 60.0 / 0.1 + 1e-9), []).append(target)
    for video in store.splits()["test"]:
        item = store.read(video)
        truths += rsd_targets(item.frame_times)
        for time in item.frame_times:
            naive.append(max(mean_duration - time / 60.0, 0.0))
            b = math.floor(time / 60.0 / 0.1 + 1e-9)
            earlier = [k for k in bins if k <= b]
            source = max(earlier) if earlier else min(bins)
            at_elapsed.append(sum(bins[source]) / len(bins[source]))
    refs = results["references"]
    assert "RSDNet" in refs["naive"]["description"]
    assert f"mean training duration ({mean_duration:.2f} min)" in refs["naive"]["description"]
    assert_close(refs["naive"]["metrics"], rsd_maes(naive, truths), 1e-9)
    assert_close(refs["elapsed-mean"]["metrics"], rsd_maes(at_elapsed, truths), 1e-9)
    assert refs["naive"]["metrics"]["MAE"] != pytest.approx(refs["elapsed-mean"]["metrics"]["MAE"], abs=1e-4)


def test_a_linear_head_learns_remaining_time_the_features_encode(tmp_path: Path) -> None:
    store = write_duration_store(tmp_path / "remaining", "remaining")
    config = LinearConfig(lrs=(0.03, 0.1), weight_decays=(0.0,), epochs=30, batch_size=32, device="cpu")
    results = run_linear_regression(store.root, "rsd", TaskSettings(), config)
    naive = results["references"]["naive"]["metrics"]["MAE"]
    assert naive > 0.5  # durations of 1.5-6 minutes: the mean duration is far off
    assert results["metrics"]["MAE"] < 0.2 * naive


def test_elapsed_adds_a_column_the_linear_head_uses_and_knn_refuses(tmp_path: Path) -> None:
    store = write_duration_store(tmp_path / "duration", "duration")  # the duration, not the elapsed time
    config = LinearConfig(lrs=(0.03, 0.1), weight_decays=(0.0,), epochs=30, batch_size=32, device="cpu")
    with_elapsed, _, data = fit_linear_regression(store.root, "rsd", TaskSettings(elapsed=True), config)
    without = run_linear_regression(store.root, "rsd", TaskSettings(), config)
    assert with_elapsed["protocol"]["elapsed"] is True and without["protocol"]["elapsed"] is False
    item = store.read("test0")
    inputs = data.inputs(item)
    assert inputs.shape == (len(item.features), item.features.shape[1] + 1)
    np.testing.assert_allclose(inputs[:, -1], item.frame_times / 60.0, rtol=1e-6)
    # remaining = duration - elapsed: linear in the features and the added column, not in the features alone
    assert with_elapsed["metrics"]["MAE"] < 0.25 * without["metrics"]["MAE"]

    with pytest.raises(ConfigError) as exc:
        run_knn_regression(store.root, "rsd", TaskSettings(elapsed=True))
    assert "--elapsed" in str(exc.value) and "\n" not in str(exc.value)


# ---------------------------------------------------------------------------------------- frame-time gaps
def test_targets_follow_the_frame_times_across_a_gap(stores) -> None:
    store = stores["gapped"]
    info, settings = StoreInfo.of(store), TaskSettings(1.0)
    for video in store.splits()["test"]:
        item = store.read(video)
        assert item.frame_times[GAP_AT] - item.frame_times[GAP_AT - 1] == 1.0 + GAP_S
        present = presence_rows(item, len(CLASSES), tools=True)
        by_time = np.asarray(anticipation_targets(present, item.frame_times, 1.0))
        by_count = np.asarray(frame_count_anticipation_targets(present, 1.0, 1.0))
        got = get_task("anticipation").regression.targets(item, info, settings)
        np.testing.assert_allclose(got, by_time, atol=1e-6)
        assert np.abs(by_time - by_count).max() > 0.1  # the gap matters to these targets
        remaining = get_task("rsd").regression.targets(item, info, settings)[:, 0]
        np.testing.assert_allclose(remaining, rsd_targets(item.frame_times), atol=1e-12)
        n = len(item.frame_times)
        assert remaining[0] == pytest.approx((n + GAP_S) / 60.0)  # not n frames' worth: the gap counts

    knn = run_knn_regression(store.root, "anticipation", settings, KnnConfig(k=5))
    test = store.splits()["test"]
    preds, truths = stacked(store, test, lambda v: knn["predictions"][v], 1.0)
    assert_close(knn["metrics"], anticipation_metrics(preds, truths, 1.0), ROUNDED + FLOAT32)
    counted = []
    for video in test:
        item = store.read(video)
        counted += frame_count_anticipation_targets(presence_rows(item, len(CLASSES), True), 1.0, 1.0)
    by_count = anticipation_metrics(preds, counted, 1.0)
    assert by_count["phase_inMAE"] != pytest.approx(knn["metrics"]["phase_inMAE"], abs=1e-3)

    rsd = run_knn_regression(store.root, "rsd", TaskSettings(), KnnConfig(k=5))
    preds = [p for v in test for p in rsd["predictions"][v]]
    by_time = [t for v in test for t in rsd_targets(store.read(v).frame_times)]
    assert_close(rsd["metrics"], rsd_maes(preds, by_time), ROUNDED)
    by_count = [t for v in test for t in rsd_targets(list(range(len(store.read(v).frame_times))))]
    assert rsd_maes(preds, by_count)["MAE"] != pytest.approx(rsd["metrics"]["MAE"], abs=1e-3)
