"""Cross-validation of the multi-label tasks (`protocols/multilabel_cv.py`, `plstitch cv --task triplets`):
every video is tested once, the reported figures are the mean and std of the folds', each fold's figures come
again from the results' predictions and the store's labels by an independent formulation (scikit-learn's AP
per class per video, then ivtmetrics' means; the CVS pooled AP and Brier score), `--folds official` tests the
store's crossval-* schemes' videos, and bad options or stores are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import average_precision_score
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_MAP, TRIPLET_NAMES
from plstitch_eval.errors import ConfigError
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols.fractions import TrainFraction
from plstitch_eval.protocols.multilabel_cv import run_multilabel_cv
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.temporal.fit import TemporalConfig
from tests.eval.tasks.cli import refused

VIDEOS = [f"VID{i:02d}" for i in range(1, 10)]
SHOWN = [17, 60, 77, 1, 94, 13]  # the triplets the videos show
CONFIG = LinearConfig(
    lrs=(0.01, 0.1, 1.0), weight_decays=(0.0,), epochs=4, balance_classes=True, device="cpu"
)
TINY_TCN = TemporalConfig(stages=2, layers=2, channels=8, epochs=2, lr=0.01, dropout=0.0, device="cpu")
COLUMN = {"IVT": 0, "I": 1, "V": 2, "T": 3, "IV": 4, "IT": 5}  # a component's column of the triplet table


def crossval(test: list[str]) -> dict[str, list[str]]:
    """A crossval scheme testing `test`: the other videos train, the last two of them validate."""
    rest = [v for v in VIDEOS if v not in test]
    return {"train": rest[:-2], "val": rest[-2:], "test": test}


def write_store(root: Path, task: str) -> FeatureStore:
    """Nine videos whose features carry their labels (+ noise): triplets (a -1 tail past the last annotated
    second) or CVS raters' means (rated on every third frame, NaN elsewhere); three crossval schemes."""
    rng = np.random.default_rng(0)
    directions = rng.normal(size=(100, 16))
    schemes = {f"crossval-{k + 1}": crossval(VIDEOS[3 * k : 3 * k + 3]) for k in range(3)}
    schemes["challenge"] = {"train": VIDEOS[:5], "val": VIDEOS[5:7], "test": VIDEOS[7:]}
    names = (
        {"triplet_names": list(TRIPLET_NAMES)} if task == "triplets" else {"cvs_names": ["C1", "C2", "C3"]}
    )
    manifest = {
        "dataset": "cholect45" if task == "triplets" else "synthetic-cvs",
        "class_names": ["a"],
        **names,
        "splits": schemes["challenge"],
        "split_schemes": schemes,
        "model": {"spec": "tiny-test-encoder", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0,
    }
    store = FeatureStore.create(root, manifest)
    for video in VIDEOS:
        n = int(rng.integers(24, 32))
        times = np.arange(n, dtype=np.float64)
        if task == "triplets":
            rows = np.zeros((n, 100), np.int8)
            rows[:, SHOWN] = rng.random((n, len(SHOWN))) < 0.4
            feats = rows @ directions + 1.5 * rng.normal(size=(n, 16))
            rows[-2:] = -1
            item = VideoFeatures(video, feats.astype(np.float32), np.zeros(n, np.int64), times, triplets=rows)
        else:
            mean = rng.integers(0, 4, size=(n, 3)) / 3.0
            rows = np.full((n, 3), np.nan, np.float32)
            rows[::3] = mean[::3]
            feats = np.concatenate([mean * 2 + 0.3 * rng.normal(size=(n, 3)), rng.normal(size=(n, 2))], 1)
            item = VideoFeatures(video, feats.astype(np.float32), np.zeros(n, np.int64), times, cvs=rows)
        store.write(item)
    return store


@pytest.fixture(scope="module")
def triplets(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    return write_store(tmp_path_factory.mktemp("triplets") / "store", "triplets")


def annotated(rows: np.ndarray) -> np.ndarray:
    """The rows of the frames a metric scores (no -1, no NaN)."""
    return rows[(np.isfinite(rows) & (rows >= 0)).all(1)]


def reference_maps(scores: list[np.ndarray], labels: list[np.ndarray]) -> dict[str, float]:
    """The six triplet mAPs (percent), written out: per component class (the max over its triplets, from
    the triplet table), scikit-learn's AP in each video with a positive; per class the mean over those
    videos; the mean over the classes that have one."""
    out = {}
    for component, column in COLUMN.items():
        members: dict[int, list[int]] = {}
        for row in TRIPLET_MAP:
            members.setdefault(row[column], []).append(row[0])
        per_class: dict[int, list[float]] = {}
        for s, y in zip(scores, labels, strict=True):
            for cid, triplet_ids in members.items():
                truth = y[:, triplet_ids].max(1)
                if truth.any():
                    ap = average_precision_score(truth, s[:, triplet_ids].max(1))
                    per_class.setdefault(cid, []).append(ap)
        out[f"mAP_{component}"] = 100 * float(np.mean([np.mean(aps) for aps in per_class.values()]))
    return out


def check_folds_recompute(results: dict, store: FeatureStore) -> None:
    """Each fold's figures from its test videos' stored predictions and the store's labels; the reported
    figures the numpy mean and std over the folds."""
    for fold in results["folds"]:
        scores = [np.asarray(results["predictions"][v]) for v in fold["test"]]
        labels = [annotated(store.read(v).triplets) for v in fold["test"]]
        for name, value in reference_maps(scores, labels).items():
            assert fold["metrics"][name] == pytest.approx(value, abs=1e-9), (fold["name"], name)
    for name in results["headline_metrics"]:
        values = [fold["metrics"][name] for fold in results["folds"]]
        assert results["metrics"][name] == pytest.approx(float(np.mean(values)), abs=1e-12)
        assert results["metrics_std"][name] == pytest.approx(float(np.std(values)), abs=1e-12)


def test_linear_cv_tests_each_video_once_and_its_figures_recompute(triplets: FeatureStore) -> None:
    results = run_multilabel_cv("triplets", triplets.root, "linear", CONFIG, folds=3, seed=0)
    assert results["task"] == "cv-linear-triplets" and results["protocol"]["balance_classes"] is True
    tested = [v for fold in results["folds"] for v in fold["test"]]
    assert sorted(tested) == VIDEOS == sorted(results["predictions"]) == sorted(results["per_video"])
    assert [fold["test"] for fold in results["folds"]] == results["splits"]["folds"]
    for fold in results["folds"]:
        assert not set(fold["val"]) & set(fold["train"]) and fold["val"]
        assert sorted([*fold["train"], *fold["val"], *fold["test"]]) == VIDEOS  # by video, nothing lost
        assert fold["chosen_lr"] in CONFIG.lrs and len(fold["val_scores"]) == len(CONFIG.lrs)
    for video in VIDEOS:  # the predictions hold the annotated frames (not the -1 tail)
        assert np.shape(results["predictions"][video]) == annotated(triplets.read(video).triplets).shape
    check_folds_recompute(results, triplets)
    assert results["metrics"]["mAP_IVT"] > 60  # the features carry the triplets
    other = run_multilabel_cv("triplets", triplets.root, "linear", CONFIG, folds=3, seed=1)
    assert [f["test"] for f in other["folds"]] != [f["test"] for f in results["folds"]]  # --seed moves them


def test_official_folds_are_the_crossval_schemes(triplets: FeatureStore) -> None:
    results = run_multilabel_cv("triplets", triplets.root, "temporal", TINY_TCN, folds="official")
    assert results["task"] == "cv-temporal-triplets" and results["protocol"]["folds"] == "official"
    assert [fold["name"] for fold in results["folds"]] == ["crossval-1", "crossval-2", "crossval-3"]
    assert [fold["test"] for fold in results["folds"]] == [VIDEOS[0:3], VIDEOS[3:6], VIDEOS[6:9]]
    for fold in results["folds"]:
        assert 1 <= fold["chosen_epoch"] <= TINY_TCN.epochs and len(fold["val_scores"]) == TINY_TCN.epochs
    check_folds_recompute(results, triplets)


def test_cvs_cv_with_a_train_fraction(tmp_path: Path) -> None:
    store = write_store(tmp_path / "cvs", "cvs")
    results = run_multilabel_cv("cvs", store.root, "linear", CONFIG, folds=3)
    assert results["task"] == "cv-linear-cvs"
    for fold in results["folds"]:  # the pooled AP and Brier score, from the stored predictions
        scores = np.concatenate([results["predictions"][v] for v in fold["test"]])
        means = np.concatenate([annotated(store.read(v).cvs) for v in fold["test"]])
        aps = [average_precision_score(np.round(means[:, j]), scores[:, j]) for j in range(3)]
        assert fold["metrics"]["mAP"] == pytest.approx(100 * np.mean(aps), abs=1e-9)
        assert fold["metrics"]["brier"] == pytest.approx(float(((scores - means) ** 2).mean()), abs=1e-9)
    assert results["metrics"]["mAP"] == pytest.approx(
        np.mean([f["metrics"]["mAP"] for f in results["folds"]])
    )
    half = run_multilabel_cv(
        "cvs", store.root, "linear", CONFIG, folds=3, train_fraction=TrainFraction(0.5, (0, 1))
    )
    block = half["train_fraction"]
    assert block["fraction"] == 0.5 and [s["seed"] for s in block["subsets"]] == [0, 1]
    for subset in block["subsets"]:  # each fold's 5 training videos -> 3 of them
        assert [len(f["videos"]) for f in subset["folds"]] == [3, 3, 3]
    assert [len(f["train"]) for f in half["folds"]] == [3, 3, 3]
    assert half["metrics"]["mAP"] == pytest.approx(np.mean([s["metrics"]["mAP"] for s in block["subsets"]]))


def test_bad_folds_and_heads_are_refused_in_one_line(triplets: FeatureStore, tmp_path: Path) -> None:
    plain = write_store(tmp_path / "plain", "triplets")
    manifest = json.loads((plain.root / "manifest.json").read_text())
    manifest["split_schemes"] = {"challenge": manifest["splits"]}
    (plain.root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError) as info:
        run_multilabel_cv("triplets", plain.root, "linear", CONFIG, folds="official")
    message = str(info.value)
    assert "\n" not in message and str(plain.root / "manifest.json") in message
    assert "no crossval-* split scheme" in message and "--folds 5" in message
    manifest["split_schemes"]["crossval-1"] = crossval(VIDEOS[:3])
    manifest["split_schemes"]["crossval-2"] = crossval(VIDEOS[2:5])
    (plain.root / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="'crossval-1' and 'crossval-2' .* both test video 'VID03'"):
        run_multilabel_cv("triplets", plain.root, "linear", CONFIG, folds="official")
    with pytest.raises(ConfigError, match="no k-NN multi-label head"):
        run_multilabel_cv("triplets", triplets.root, "knn", folds=3)
    with pytest.raises(ConfigError, match="--folds must be between 2"):
        run_multilabel_cv("triplets", triplets.root, "linear", CONFIG, folds=12)


def test_cli_writes_the_cv_json_and_refuses_what_it_does_not_take(
    triplets: FeatureStore, tmp_path: Path
) -> None:
    out = tmp_path / "cv.json"
    base = ["cv", "--features", str(triplets.root), "--task", "triplets"]
    small = ["--epochs", "3", "--set", "lrs=[0.1, 1.0]", "--set", "weight_decays=[0.0]", "--device", "cpu"]
    result = CliRunner().invoke(
        app, [*base, "--protocol", "linear", "--folds", "3", *small, "--json", str(out)]
    )
    assert result.exit_code == 0, result.output
    printed = " ".join(result.stdout.split())  # the title wraps over the narrow table
    assert "3-fold CV by video (linear, triplets)" in printed and "mAP_IVT" in printed
    results = json.loads(out.read_text())
    assert results["task"] == "cv-linear-triplets" and len(results["folds"]) == 3
    assert results["protocol"]["balance_classes"] is True and results["protocol"]["lrs"] == [0.1, 1.0]
    check_folds_recompute(results, triplets)
    line = refused(*base, "--protocol", "knn")
    assert "no k-NN multi-label head" in line and "--protocol linear or temporal" in line
    assert "--relaxed" in refused(*base, "--protocol", "linear", "--relaxed")
    assert "official: with --task tools" in refused(
        "cv", "--features", str(triplets.root), "--folds", "official"
    )
