"""The `triplets` task end to end: the CholecT50 stand-in extracted by `plstitch extract`, then `plstitch
linear --task triplets` gives the six ivtmetrics mAPs, chosen on validation mAP_IVT, and `triplet_maps` on
the results' `predictions` with the store's labels gives every reported figure again; label fractions run;
a store without triplets, and options the task does not take, are refused in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.benchmark.inputs import parse_tasks
from plstitch_eval.cli import app
from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_NAMES
from plstitch_eval.errors import ConfigError
from plstitch_eval.metrics.triplets import triplet_maps
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import MULTI_LABEL, get_task
from tests.eval.protocols.stores import write_store
from tests.eval.tasks.cli import refused
from tests.eval.tasks.t50_stand_in import VIDEOS, extract_t50, write_t50

MAPS = ["mAP_I", "mAP_V", "mAP_T", "mAP_IV", "mAP_IT", "mAP_IVT"]
QUICK = ["--epochs", "5", "--lr", "0.01", "--lr", "0.1", "--wd", "0", "--wd", "0.001"]
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    root = write_t50(tmp_path_factory.mktemp("t50") / "CholecT50")
    return FeatureStore(extract_t50(root, tmp_path_factory.mktemp("t50-store") / "store"))


def linear(store: FeatureStore, out: Path, *more: str) -> dict:
    args = ["linear", "--features", str(store.root), "--task", "triplets", *QUICK, "--json", str(out), *more]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert all(name in result.stdout for name in MAPS)
    return json.loads(out.read_text())


def annotated(store: FeatureStore, video: str) -> np.ndarray:
    rows = store.read(video).triplets
    return rows[(rows >= 0).all(axis=1)]


def test_the_task_is_registered_and_listed() -> None:
    task = get_task("triplets")
    assert task.head == MULTI_LABEL and task.select_metric == "mAP_IVT" and list(task.metrics) == MAPS
    assert task.results_task("linear") == "linear-triplets"
    result = runner.invoke(app, ["tasks", "--json", "-"])
    assert result.exit_code == 0, result.output
    row = {r["name"]: r for r in json.loads(result.stdout)["tasks"]}["triplets"]
    assert row["head"] == "multi-label" and row["package"] == "plstitch"
    assert row["protocols"] == ["linear", "temporal"]


def test_linear_triplets_gives_the_six_maps_that_its_predictions_give_again(
    store: FeatureStore, tmp_path: Path
) -> None:
    results = linear(store, tmp_path / "t.json")
    assert results["task"] == "linear-triplets" and results["headline_metrics"] == MAPS
    assert results["class_names"] == list(TRIPLET_NAMES)
    test = [f"VID{n:02d}" for n in VIDEOS["test"]]
    assert results["splits"]["test"] == test and set(results["predictions"]) == set(test)
    scores = [np.array(results["predictions"][v]) for v in test]
    labels = [annotated(store, v) for v in test]
    assert [s.shape for s in scores] == [y.shape for y in labels] and scores[0].shape[1] == 100
    again = triplet_maps(scores, labels)
    for name in MAPS:
        assert math.isfinite(results["metrics"][name]) and 0 < results["metrics"][name] <= 100
        assert results["metrics"][name] == pytest.approx(again[f"mAP_{name[4:].lower()}"], abs=1e-9)
    for video, s, y in zip(test, scores, labels, strict=True):
        alone = triplet_maps([s], [y])
        assert results["per_video"][video] == pytest.approx({m: alone[f"mAP_{m[4:].lower()}"] for m in MAPS})
    protocol = results["protocol"]
    assert protocol["select_metric"] == "mAP_IVT" and protocol["validation"] == "official"
    best = max(protocol["val_scores"], key=protocol["val_scores"].get)
    assert best == f"lr={protocol['chosen_lr']:g},wd={protocol['chosen_weight_decay']:g}"
    assert protocol["frames"]["test"] == sum(len(y) for y in labels)
    # the frames show their triplets: the probe beats scores that ignore the frames
    flat = triplet_maps([np.zeros_like(s) for s in scores], labels)
    assert results["metrics"]["mAP_IVT"] > flat["mAP_ivt"] + 10


def test_label_fractions_train_on_subsets(store: FeatureStore, tmp_path: Path) -> None:
    results = linear(store, tmp_path / "f.json", "--train-fraction", "0.5", "--fraction-seeds", "2")
    block = results["train_fraction"]
    assert block["fraction"] == 0.5 and len(block["subsets"]) == 2
    assert all(len(subset["videos"]) == 2 for subset in block["subsets"])  # 2 of the 4 training videos
    assert set(results["metrics"]) >= set(MAPS) and set(results["metrics_std"]) >= set(MAPS)


def test_a_store_without_triplets_is_refused_naming_it_and_the_fix(tmp_path: Path) -> None:
    plain = write_store(tmp_path / "plain")
    line = refused("linear", "--features", str(plain.root), "--task", "triplets")
    assert f"{plain.root / 'manifest.json'} records no triplet names" in line
    assert "--dataset cholect50 or cholect45" in line


def test_options_the_task_does_not_take_are_refused(store: FeatureStore, tmp_path: Path) -> None:
    line = refused("linear", "--features", str(store.root), "--task", "triplets", "--relaxed")
    assert "--relaxed: only with --task phases" in line and "mAP_IVT" in line  # --save: a probe
    cv = refused("cv", "--features", str(store.root), "--task", "triplets", "--protocol", "knn")
    assert cv.startswith("error: cv --task triplets --protocol knn: there is no k-NN multi-label head")
    assert "--task triplets is not fitted by knn" in refused(
        "knn", "--features", str(store.root), "--task", "triplets"
    )


def test_benchmark_tasks_takes_triplets_and_tools() -> None:
    assert parse_tasks("phases,triplets,tools") == ("phases", "triplets", "tools")
    with pytest.raises(ConfigError, match="triplet"):
        parse_tasks("phases,triplet")
