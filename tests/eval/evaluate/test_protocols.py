"""Protocols on tiny real feature stores: splits by video, CV folds, results JSON, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plstitch_eval.errors import ConfigError, EvaluationError, FeatureStoreError
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols import (
    SCHEMA,
    default_metrics,
    holdout_by_video,
    kfold_by_video,
    resolve_splits,
    run_cv,
    run_knn,
    run_linear,
    write_results,
)
from plstitch_eval.store.features import FeatureStore, VideoFeatures

from .conftest import make_store, relabel

FAST = LinearConfig(lrs=(0.01, 0.1), weight_decays=(0.0,), epochs=5, batch_size=64, device="cpu")


def test_holdout_and_kfold_are_by_video():
    videos = [f"v{i}" for i in range(11)]
    train, val = holdout_by_video(videos, 0.2, seed=3)
    assert set(train).isdisjoint(val) and set(train) | set(val) == set(videos) and len(val) == 2
    assert holdout_by_video(videos, 0.2, seed=3) == (train, val)
    folds = kfold_by_video(videos, 5, seed=0)
    assert sorted(v for f in folds for v in f) == sorted(videos)
    assert sorted(len(f) for f in folds) == [2, 2, 2, 2, 3]
    with pytest.raises(ConfigError, match="folds"):
        kfold_by_video(videos, 12)


def test_resolve_nested_split_schemes(tmp_path):
    store = FeatureStore.create(
        tmp_path / "s",
        {
            "dataset": "cholec80",
            "splits": {"40-40": {"train": ["a"], "test": ["b"]}, "32-8-40": {"train": ["c"]}},
        },
    )
    assert resolve_splits(store) == {"train": ["a"], "val": [], "test": ["b"]}
    assert resolve_splits(store, "32-8-40")["train"] == ["c"]
    with pytest.raises(ConfigError, match="nope"):
        resolve_splits(store, "nope")


def test_default_metrics_per_dataset():
    assert default_metrics("gtea") == ("accuracy", "edit", "f1@10", "f1@25", "f1@50")
    assert default_metrics("breakfast")[1] == "edit"
    assert default_metrics("cholec80") == ("accuracy", "macro_f1_pooled", "macro_f1_video")


def test_knn_results_follow_the_schema(tiny_store, tmp_path):
    res = run_knn(tiny_store.root, KnnConfig(k=5), extra_ks=[1])
    assert res["schema"] == SCHEMA and res["task"] == "knn" and res["dataset"] == "gtea"
    assert res["model"]["spec"] == "tiny-test-encoder"
    assert res["protocol"]["k"] == 5 and res["protocol"]["weighting"] == "exp"
    assert set(res["predictions"]) == set(res["splits"]["test"]) == set(res["per_video"])
    for video, preds in res["predictions"].items():
        assert len(preds) == len(tiny_store.read(video).labels)
    assert res["metrics"]["accuracy"] > 95.0  # well-separated classes
    assert {"edit", "f1@10", "f1@25", "f1@50", "macro_f1_pooled", "macro_f1_video"} <= set(res["metrics"])
    assert set(res["metrics_by_k"]) == {"5", "1"}
    write_results(tmp_path / "r.json", res)
    assert json.loads((tmp_path / "r.json").read_text())["metrics"] == res["metrics"]


def test_linear_holds_out_training_videos_without_val(tmp_path):
    store = make_store(tmp_path / "s", with_val=False)
    res = run_linear(store.root, FAST)
    s = res["splits"]
    assert s["val"] and set(s["val"]).isdisjoint(s["train"]) and set(s["val"]).isdisjoint(s["test"])
    assert "held out by video" in res["protocol"]["validation"]
    assert res["protocol"]["chosen_lr"] in (0.01, 0.1)
    assert res["metrics"]["accuracy"] > 95.0
    official = run_linear(make_store(tmp_path / "o").root, FAST)
    assert official["protocol"]["validation"] == "official"


def test_cv_covers_every_video_once(tiny_store):
    res = run_cv(tiny_store.root, folds=4, protocol="knn", knn_config=KnnConfig(k=3))
    tested = [v for fold in res["splits"]["folds"] for v in fold]
    assert sorted(tested) == sorted(tiny_store.videos()) == sorted(res["predictions"])
    accs = [f["metrics"]["accuracy"] for f in res["folds"]]
    assert res["metrics"]["accuracy"] == pytest.approx(np.mean(accs))
    assert res["metrics_std"]["accuracy"] == pytest.approx(np.std(accs))
    lin = run_cv(tiny_store.root, folds=2, protocol="linear", linear_config=FAST)
    assert lin["protocol"]["inner"] == "linear" and "chosen_lr" in lin["folds"][0]


def _rewrite(store, video, features=None, labels=None):
    item = store.read(video)
    store.write(
        VideoFeatures(
            video,
            item.features if features is None else features,
            item.labels if labels is None else labels,
            item.frame_times,
        )
    )


def test_nan_features_and_empty_ground_truth_name_the_video(tiny_store):
    test_video = tiny_store.splits()["test"][0]
    feats = tiny_store.read(test_video).features.copy()
    feats[2, 0] = np.nan
    _rewrite(tiny_store, test_video, features=feats)
    with pytest.raises(EvaluationError, match=f"{test_video}.*frame 2"):
        run_knn(tiny_store.root)
    _rewrite(tiny_store, test_video, features=np.nan_to_num(feats), labels=-np.ones(len(feats), np.int64))
    with pytest.raises(EvaluationError, match=f"{test_video}.*no labelled frames"):
        run_knn(tiny_store.root)


def test_test_class_absent_from_training_is_defined(tiny_store):
    train_videos = tiny_store.splits()["train"]
    for v in train_videos:  # remove class 3 ("pour") from training by relabelling it 2
        labels = tiny_store.read(v).labels.copy()
        labels[labels == 3] = 2
        _rewrite(tiny_store, v, labels=labels)
    res = run_knn(tiny_store.root, KnnConfig(k=3), train_on=["train"])
    preds = np.concatenate([res["predictions"][v] for v in res["splits"]["test"]])
    assert 3 not in preds
    gts = np.concatenate([tiny_store.read(v).labels for v in res["splits"]["test"]])
    assert res["metrics"]["accuracy"] == pytest.approx((preds == gts).mean() * 100)


def test_resolve_split_schemes_as_written_by_extract(tmp_path):
    manifest = {
        "dataset": "cholec80",
        "splits": {"train": ["a"], "test": ["b"]},
        "split_scheme": "40-40",
        "split_schemes": {
            "40-40": {"train": ["a"], "test": ["b"]},
            "32-8-40": {"train": ["c"], "val": ["d"]},
        },
    }
    store = FeatureStore.create(tmp_path / "s", manifest)
    assert resolve_splits(store) == {"train": ["a"], "val": [], "test": ["b"]}
    assert resolve_splits(store, "40-40")["test"] == ["b"]
    assert resolve_splits(store, "32-8-40") == {"train": ["c"], "val": ["d"], "test": []}


def _drop_last_class_name(store: FeatureStore) -> None:
    manifest = {k: v for k, v in store.manifest.items() if k != "format_version"}
    manifest["class_names"] = manifest["class_names"][:-1]
    store.write_manifest(manifest)


@pytest.mark.parametrize("run", [run_knn, lambda root: run_linear(root, FAST), lambda root: run_cv(root, 3)])
def test_labels_not_covered_by_class_names_are_refused(tiny_store, tmp_path, run):
    _drop_last_class_name(tiny_store)  # label 3 ("pour") is used by the videos but no longer named
    results = tmp_path / "results.json"
    with pytest.raises(FeatureStoreError, match=r"has label 3 .*manifest\.json lists 3 class_names") as info:
        write_results(results, run(tiny_store.root))
    assert "\n" not in str(info.value) and "plstitch extract" in str(info.value)
    assert not results.exists()


def test_negative_labels_other_than_unlabelled_are_refused(tiny_store):
    video = tiny_store.splits()["train"][0]
    labels = tiny_store.read(video).labels.copy()
    labels[0], labels[1] = -1, -2  # -1 = unlabelled is fine, -2 is not
    _rewrite(tiny_store, video, labels=labels)
    with pytest.raises(FeatureStoreError, match=rf"{video}\.safetensors has label -2"):
        run_knn(tiny_store.root)
    labels[1] = -1
    _rewrite(tiny_store, video, labels=labels)
    assert run_knn(tiny_store.root)["class_names"] == tiny_store.class_names


def test_write_results_dash_prints_json_on_stdout(tiny_store, capsys):
    results = run_knn(tiny_store.root, KnnConfig(k=3))
    write_results("-", results)
    assert json.loads(capsys.readouterr().out)["metrics"] == pytest.approx(results["metrics"])


# ------------------------------------------------------------------------- k above the training frames
def _labelled_train(store, splits=("train",)):
    """Training frames and labels of `splits`, read straight from the store files."""
    items = [store.read(v) for s in splits for v in store.splits()[s]]
    feats = np.concatenate([it.features[it.labels >= 0] for it in items])
    return feats, np.concatenate([it.labels[it.labels >= 0] for it in items])


@pytest.mark.parametrize("weighting", ["uniform", "similarity"])
def test_k_above_training_frames_is_clamped_warned_and_recorded(tiny_store, plstitch_warnings, weighting):
    """k = 5000 over fewer frames: every training frame votes, the k used is recorded and warned about.

    Independent formulation with all training frames voting: uniform votes = class counts, so every frame
    gets the majority class; similarity votes = q . (sum of the class's unit training vectors).
    """
    train_x, train_y = _labelled_train(tiny_store)
    n_train = len(train_y)
    assert n_train < 5000
    res = run_knn(tiny_store.root, KnnConfig(k=5000, weighting=weighting))
    assert res["protocol"]["k"] == n_train and res["protocol"]["k_requested"] == 5000
    assert res["protocol"]["ks"] == [n_train] and res["protocol"]["ks_requested"] == [5000]
    assert f"k=5000 > {n_train} training frames: using k={n_train}" in plstitch_warnings()

    unit = train_x / np.linalg.norm(train_x, axis=1, keepdims=True)
    class_sums = np.stack([unit[train_y == c].sum(0) for c in range(4)])
    for video in res["splits"]["test"]:
        feats = tiny_store.read(video).features
        if weighting == "uniform":
            want = np.full(len(feats), np.bincount(train_y, minlength=4).argmax())
        else:
            want = (feats / np.linalg.norm(feats, axis=1, keepdims=True) @ class_sums.T).argmax(1)
        np.testing.assert_array_equal(res["predictions"][video], want)


def test_several_k_are_all_scored_and_keyed_by_the_k_used(tiny_store, plstitch_warnings):
    n_train = len(_labelled_train(tiny_store)[1])
    config = KnnConfig(k=1, weighting="uniform")
    res = run_knn(tiny_store.root, config, extra_ks=[3, 5000, 9000])
    assert res["protocol"]["ks"] == [1, 3, n_train]  # 5000 and 9000 both use every frame
    assert res["protocol"]["ks_requested"] == [1, 3, 5000, 9000]
    assert list(res["metrics_by_k"]) == ["1", "3", str(n_train)]
    assert res["metrics_by_k"]["1"] == res["metrics"]
    for k in (3, n_train):
        alone = run_knn(tiny_store.root, KnnConfig(k=k, weighting="uniform"))
        assert res["metrics_by_k"][str(k)] == pytest.approx(alone["metrics"])
    warned = plstitch_warnings()
    assert f"k=9000 > {n_train} training frames: using k={n_train}" in warned


def test_cv_knn_records_the_k_each_fold_used(tiny_store, plstitch_warnings):
    res = run_cv(tiny_store.root, folds=4, protocol="knn", knn_config=KnnConfig(k=5000))
    videos = tiny_store.videos()
    frames = {v: int((tiny_store.read(v).labels >= 0).sum()) for v in videos}
    for i, fold in enumerate(res["folds"]):
        n_train = sum(n for v, n in frames.items() if v not in fold["test"])
        assert fold["k"] == n_train
        assert f"CV fold {i}: k=5000 > {n_train} training frames: using k={n_train}" in plstitch_warnings()
    assert (
        res["protocol"]["k"] == min(f["k"] for f in res["folds"]) and res["protocol"]["k_requested"] == 5000
    )


# ----------------------------------------------------------------------- fewer than two training classes
def _one_class(store, videos=None, label=1):
    for video in videos or store.videos():
        relabel(store, video, np.full(len(store.read(video).labels), label))


@pytest.mark.parametrize(
    ("run", "where"),
    [
        (lambda root: run_knn(root, KnnConfig(k=3)), "Training split 'train' of "),
        (lambda root: run_linear(root, FAST), "Training split 'train' of "),
        (lambda root: run_cv(root, 3, "knn"), "Feature store "),
        (lambda root: run_cv(root, 3, "linear", linear_config=FAST), "Feature store "),
    ],
)
def test_one_class_store_is_refused_not_scored(tiny_store, run, where):
    _one_class(tiny_store)
    with pytest.raises(EvaluationError) as info:
        run(tiny_store.root)
    message = str(info.value)
    assert "\n" not in message
    assert f"{where}{tiny_store.root}" in message and "only one class ('cut')" in message


def test_knn_train_on_names_every_split(tiny_store):
    _one_class(tiny_store, tiny_store.splits()["train"] + tiny_store.splits()["val"])
    with pytest.raises(EvaluationError, match=r"Training split 'train'\+'val' of .*--train-on"):
        run_knn(tiny_store.root, train_on=["train", "val"])


def test_linear_refuses_one_class_left_after_the_validation_hold_out(tmp_path):
    store = make_store(tmp_path / "s", with_val=False)
    train = store.splits()["train"]
    _, held_out = holdout_by_video(train, 0.2, seed=0)
    _one_class(store, [v for v in train if v not in held_out])  # only the held-out videos had two classes
    with pytest.raises(EvaluationError, match="less the videos held out for validation .*val-fraction"):
        run_linear(store.root, FAST)


@pytest.mark.parametrize("protocol", ["knn", "linear"])
def test_cv_refuses_a_fold_that_trains_on_one_class(tiny_store, protocol):
    videos = tiny_store.videos()
    folds = kfold_by_video(videos, 4, seed=0)
    _one_class(tiny_store, [v for v in videos if v not in folds[2]])  # two classes only in fold 2's videos
    with pytest.raises(EvaluationError, match=r"CV fold 2 of .*only one class \('cut'\).*--folds"):
        run_cv(tiny_store.root, 4, protocol, linear_config=FAST)


# ------------------------------------------------------------- CV: what each fold's trainer is given
def _frame_owner(store):
    """Video of each stored feature row (rows are unique: class centre + noise)."""
    owner = {}
    for video in store.videos():
        for row in store.read(video).features.astype(np.float32):
            owner[row.tobytes()] = video
    assert len(owner) == sum(len(store.read(v).features) for v in store.videos())
    return owner


def _videos_of(rows, owner):
    return {owner[np.asarray(row, np.float32).tobytes()] for row in rows}


@pytest.mark.parametrize("protocol", ["knn", "linear"])
def test_cv_trains_each_fold_without_its_test_videos(tiny_store, monkeypatch, protocol):
    """Intercept the trainer of every fold: the videos whose frames it trains (and validates) on never
    include the fold's test videos, and every video is tested exactly once."""
    import plstitch_eval.protocols.knn as knn_protocol
    import plstitch_eval.protocols.linear as linear_protocol

    owner = _frame_owner(tiny_store)
    calls = []
    real_knn, real_fit = knn_protocol.knn_predict_multi, linear_protocol.fit_linear_probe

    def knn_spy(train_x, train_y, queries, *args, **kwargs):
        calls.append({"train": _videos_of(train_x, owner), "val": set(), "test": _videos_of(queries, owner)})
        return real_knn(train_x, train_y, queries, *args, **kwargs)

    def fit_spy(train_x, train_y, val_x, val_y, *args, **kwargs):
        call = {"train": _videos_of(train_x, owner), "val": _videos_of(val_x, owner), "test": set()}
        calls.append(call)
        probe = real_fit(train_x, train_y, val_x, val_y, *args, **kwargs)
        predict = probe.predict

        def predict_spy(features):
            call["test"] |= _videos_of(features, owner)
            return predict(features)

        probe.predict = predict_spy
        return probe

    monkeypatch.setattr(knn_protocol, "knn_predict_multi", knn_spy)  # where each protocol's fold fit looks
    monkeypatch.setattr(linear_protocol, "fit_linear_probe", fit_spy)
    res = run_cv(tiny_store.root, folds=4, protocol=protocol, knn_config=KnnConfig(k=3), linear_config=FAST)

    videos = set(tiny_store.videos())
    assert len(calls) == 4 == len(res["folds"])
    for call, fold in zip(calls, res["folds"], strict=True):
        assert call["test"] == set(fold["test"])
        assert call["train"].isdisjoint(call["test"]) and call["val"].isdisjoint(call["test"])
        assert call["train"].isdisjoint(call["val"])
        assert call["train"] | call["val"] | call["test"] == videos  # nothing else dropped
    tested = [v for call in calls for v in call["test"]]
    assert sorted(tested) == sorted(videos)  # each video tested exactly once
