"""A protocol registered from outside the package (one `Protocol`, no edit elsewhere) runs everywhere the
shipped ones do: `run_cv` cross-validates it, `plstitch benchmark` runs it as a cell and as the inner
protocol of `cv`, its label heads its table columns, and its own setting is read from a benchmark config
file by its name. The toy is nearest-centroid classification, checked against scikit-learn's
`NearestCentroid`."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.neighbors import NearestCentroid

from plstitch_eval.benchmark.config import BenchmarkConfig
from plstitch_eval.benchmark.config_file import read_config_file
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.protocols import (
    TASK_LABELS,
    CvFit,
    Fold,
    Protocol,
    benchmark_protocols,
    build_results,
    cv_protocols,
    load_videos,
    register_protocol,
    resolve_splits,
    run_cv,
    score_videos,
    stack_labelled,
    store_context,
    unregister_protocol,
)
from plstitch_eval.protocols.registry import config_record, numbers_only
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from tests.eval.benchmark.conftest import SMALL_DATASET, cli_args, runner, table_json
from tests.eval.evaluate.conftest import make_store

TOY = "toy-centroid"


@dataclass
class CentroidConfig:
    """The toy's one setting: L2-normalise features before taking class means."""

    normalize: bool = False


def centroid_predict(
    train: Sequence[VideoFeatures], test: Sequence[VideoFeatures], num_classes: int, config: CentroidConfig
) -> dict[str, np.ndarray]:
    """Each test frame gets the class whose mean training feature is nearest (Euclidean)."""
    x, y = stack_labelled(train)
    prep = (lambda f: f / np.linalg.norm(f, axis=1, keepdims=True)) if config.normalize else (lambda f: f)
    x = prep(x)
    centres = np.stack(
        [x[y == c].mean(0) if (y == c).any() else np.zeros(x.shape[1]) for c in range(num_classes)]
    )
    present = np.isin(np.arange(num_classes), y)
    preds = {}
    for item in test:
        dist = ((prep(item.features)[:, None, :] - centres[None]) ** 2).sum(-1)
        preds[item.video] = np.where(present[None], dist, np.inf).argmin(1)
    return preds


def _fit_fold(
    fold: Fold, config: CentroidConfig, progress: bool
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    preds = centroid_predict(fold.train, fold.test, fold.num_classes, config)
    return preds, {"classes_seen": int(len(np.unique(fold.train_labels)))}


def _run(features: str | Path, config: Any, scheme: str | None) -> dict[str, Any]:
    toy_config = TOY_PROTOCOL.config_of(config)
    store = FeatureStore(features)
    manifest, class_names, n_classes, bg = store_context(store)
    splits = resolve_splits(store, scheme)
    train = load_videos(store, splits["train"] + splits["val"])
    test = load_videos(store, splits["test"])
    preds = centroid_predict(train, test, n_classes, toy_config)
    scored = score_videos(preds, {it.video: it.labels for it in test}, n_classes, bg)
    protocol = {"name": TOY, **config_record(toy_config)}
    return build_results(TOY, manifest, features, protocol, splits, class_names, scored, preds)


TOY_PROTOCOL = Protocol(
    name=TOY,
    label="centroid",
    title="Nearest class mean",
    config_type=CentroidConfig,
    run=_run,
    cv=CvFit(_fit_fold, holds_out_val=False),
    settings=lambda config: {TOY: numbers_only(TOY_PROTOCOL.config_of(config))},
)


@pytest.fixture
def toy() -> Iterator[Protocol]:
    """The toy registered for one test, then removed so other tests see the shipped protocols only."""
    yield register_protocol(TOY_PROTOCOL)
    unregister_protocol(TOY)


def _sklearn_predictions(store: FeatureStore, train_videos: Sequence[str], test_videos: Sequence[str]):
    x, y = stack_labelled(store.read_many(train_videos))
    model = NearestCentroid().fit(x, y)
    return {v: model.predict(store.read(v).features) for v in test_videos}


def test_the_toy_is_listed_while_registered_only(toy: Protocol) -> None:
    assert TOY in cv_protocols() and benchmark_protocols()[-1] == TOY
    assert TASK_LABELS[TOY] == "centroid" and TASK_LABELS[f"cv-{TOY}"] == "CV centroid"
    unregister_protocol(TOY)
    assert TOY not in cv_protocols() and TOY not in TASK_LABELS


def test_run_cv_cross_validates_the_toy(toy: Protocol, tmp_path: Path) -> None:
    store = make_store(tmp_path / "store", n_videos=8)
    results = run_cv(store.root, folds=4, protocol=TOY, seed=0)
    assert results["task"] == "cv" and results["protocol"]["inner"] == TOY
    assert results["protocol"]["normalize"] is False and len(results["folds"]) == 4
    videos = store.videos()
    for fold in results["folds"]:
        train = [v for v in videos if v not in fold["test"]]  # the toy holds no validation videos out
        expected = _sklearn_predictions(store, train, fold["test"])
        for video in fold["test"]:
            np.testing.assert_array_equal(results["predictions"][video], expected[video])
        assert fold["classes_seen"] == 4
    assert sorted(v for f in results["folds"] for v in f["test"]) == sorted(videos)  # each tested once


def test_benchmark_runs_the_toy_as_a_cell_and_inside_cv(
    toy: Protocol, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLSTITCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    datasets = tmp_path / "small.toml"
    datasets.write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    args = cli_args(out, str(datasets), models="plstitch-tiny-synthetic", protocols=f"{TOY},cv")
    result = runner.invoke(app, [*args, "--cv-protocol", TOY, "--folds", "2"])
    assert result.exit_code == 0, result.output
    table = table_json(out)
    assert [c["protocol"] for c in table["cells"]] == [TOY, "cv"]
    assert all(c["status"] == "done" for c in table["cells"])
    headers = [c["header"] for c in table["columns"]]
    assert "synthetic centroid Acc" in headers and "synthetic CV centroid Acc" in headers
    assert "synthetic centroid Acc" in (out / "table.md").read_text(encoding="utf-8")
    cell = json.loads(Path(table["cells"][0]["results"]).read_text(encoding="utf-8"))
    assert cell["task"] == TOY and cell["benchmark"]["settings"][TOY] == {"normalize": False}
    store = FeatureStore(table["cells"][0]["features"])
    splits = resolve_splits(store)
    expected = _sklearn_predictions(store, splits["train"] + splits["val"], splits["test"])
    for video in splits["test"]:
        np.testing.assert_array_equal(cell["predictions"][video], expected[video])
    cv = json.loads(Path(table["cells"][1]["results"]).read_text(encoding="utf-8"))
    assert cv["protocol"]["inner"] == TOY and cv["benchmark"]["settings"]["inner"] == TOY
    assert table["cells"][0]["metrics"]["accuracy"] == pytest.approx(cell["metrics"]["accuracy"])


def test_a_benchmark_config_file_sets_the_toy_by_its_name(
    toy: Protocol, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`[protocols.toy-centroid] normalize = true` reaches the toy's run and its recorded settings, with no
    field or flag of the toy in `BenchmarkConfig` or the CLI."""
    monkeypatch.setenv("PLSTITCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "out"
    datasets = tmp_path / "small.toml"
    datasets.write_text("[synthetic]\n" + "".join(f"{k} = {v}\n" for k, v in SMALL_DATASET.items()))
    config_file = tmp_path / "bench.toml"
    config_file.write_text(f"[protocols.{TOY}]\nnormalize = true\n")
    args = cli_args(out, str(datasets), models="plstitch-tiny-synthetic", protocols=TOY)
    result = runner.invoke(app, [*args, "--config", str(config_file)])
    assert result.exit_code == 0, result.output
    cell_info = table_json(out)["cells"][0]
    cell = json.loads(Path(cell_info["results"]).read_text(encoding="utf-8"))
    assert cell["protocol"]["normalize"] is True
    assert cell["benchmark"]["settings"][TOY] == {"normalize": True}
    store = FeatureStore(cell_info["features"])
    splits = resolve_splits(store)
    train = store.read_many(splits["train"] + splits["val"])
    test = store.read_many(splits["test"])
    num_classes = len(store.class_names)
    expected = centroid_predict(train, test, num_classes, CentroidConfig(normalize=True))
    for video in splits["test"]:
        np.testing.assert_array_equal(cell["predictions"][video], expected[video])


def test_a_config_file_names_what_it_cannot_set(toy: Protocol, tmp_path: Path) -> None:
    config_file = tmp_path / "bench.toml"
    config_file.write_text(f"[protocols.{TOY}]\nradius = 2\n")
    with pytest.raises(ConfigError, match="unknown setting.*radius.*normalize"):
        BenchmarkConfig(
            "plstitch-tiny-synthetic", "synthetic", tmp_path, protocol_configs=read_config_file(config_file)
        )
    config_file.write_text("[protocols.knn]\nk = 3\n")
    with pytest.raises(ConfigError, match="BenchmarkConfig.knn"):
        BenchmarkConfig(
            "plstitch-tiny-synthetic", "synthetic", tmp_path, protocol_configs=read_config_file(config_file)
        )


def test_cv_set_reaches_the_toy_and_protocols_lists_it(toy: Protocol, tmp_path: Path) -> None:
    """`plstitch cv --protocol toy --set normalize=true` sets the toy's config through its dataclass (no flag
    of its own), and `plstitch protocols` lists the toy's field while it is registered."""
    store = make_store(tmp_path / "store", n_videos=8)
    out = tmp_path / "cv.json"
    args = ["cv", "--features", str(store.root), "--protocol", TOY, "--folds", "4", "--json", str(out)]
    result = runner.invoke(app, [*args, "--set", "normalize=true"])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text(encoding="utf-8"))
    assert results["protocol"]["normalize"] is True
    videos = store.videos()
    for fold in results["folds"]:
        train = store.read_many([v for v in videos if v not in fold["test"]])
        expected = centroid_predict(train, store.read_many(fold["test"]), 4, CentroidConfig(normalize=True))
        for video in fold["test"]:
            np.testing.assert_array_equal(results["predictions"][video], expected[video])
    listed = runner.invoke(app, ["protocols", "--json", "-"])
    assert listed.exit_code == 0, listed.output
    row = next(r for r in json.loads(listed.stdout)["protocols"] if r["name"] == TOY)
    assert row["settings"] == [{"name": "normalize", "default": False, "runtime": False}]
    assert row["benchmark"] and row["cv"] and row["config"] == "CentroidConfig"
    refused = runner.invoke(app, [*args, "--set", "knn.k=3"])
    assert refused.exit_code == 1 and "runs --protocol toy-centroid: set its fields only" in refused.output
