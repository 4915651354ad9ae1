"""Protocols on tiny real feature stores: splits by video, CV folds, results JSON, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from plstitch_eval.errors import ConfigError, EvaluationError, FeatureStoreError
from plstitch_eval.features import FeatureStore, VideoFeatures
from plstitch_eval.knn import KnnConfig
from plstitch_eval.linear import LinearConfig
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

from .conftest import make_store

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
