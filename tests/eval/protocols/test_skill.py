"""The skill head (`protocols/skill.py`) against independent formulations: its alpha is the one a brute-force
leave-one-out over the training videos picks, and its predictions are the closed-form ridge's; `cv --task
skill --folds louo` on a store of JIGSAWS trial names (no frame labels, as JIGSAWS) tests one user per fold,
each fold's figures equal `skill_scores` of its predictions, and the training mean's rho is undefined."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.metrics.skill import skill_scores
from plstitch_eval.protocols.skill import ALPHAS, SkillData, ridge_predictions, run_skill_cv, run_skill_linear
from plstitch_eval.store.features import FeatureStore, VideoFeatures

USERS, TRIALS, DIM = "BCDEF", 3, 8
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    """JIGSAWS-named trials whose mean feature follows the GRS along one direction, plus noise; unlabelled
    frames; durations loosely tied to skill."""
    rng = np.random.default_rng(3)
    direction = rng.normal(size=DIM)
    scores, items = {}, []
    for user in USERS:
        for trial in range(1, TRIALS + 1):
            name = f"Suturing_{user}{trial:03d}"
            parts = rng.integers(1, 6, size=6).astype(float)
            grs = float(parts.sum())
            scores[name] = {"grs": grs, **{f"item{i}": float(p) for i, p in enumerate(parts)}}
            n = int(rng.integers(6, 12)) + int(30 - grs) // 4
            feats = (grs / 10) * direction + rng.normal(size=(n, DIM))
            items.append(VideoFeatures(name, feats.astype(np.float32), np.full(n, -1), np.arange(n) * 1.0))
    names = sorted(scores)
    manifest = {
        "dataset": "jigsaws",
        "class_names": [],
        "splits": {
            "train": [v for v in names if not v.endswith("001")],
            "val": [],
            "test": [v for v in names if v.endswith("001")],
        },
        "model": {"spec": "toy", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0,
        "skill_names": ["grs", *(f"item{i}" for i in range(6))],
        "skill": scores,
    }
    store = FeatureStore.create(tmp_path_factory.mktemp("jigsaws") / "store", manifest)
    for item in items:
        store.write(item)
    return store


def standardised(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, std = train.mean(0), train.std(0)
    std[std == 0] = 1.0
    return (train - mean) / std, (test - mean) / std


def closed_form(x: np.ndarray, y: np.ndarray, alpha: float, queries: np.ndarray) -> np.ndarray:
    """Ridge with an unpenalised intercept: centre, solve (X'X + aI) w = X'(y - mean y)."""
    mx, my = x.mean(0), y.mean()
    w = np.linalg.solve((x - mx).T @ (x - mx) + alpha * np.eye(x.shape[1]), (x - mx).T @ (y - my))
    return my + (queries - mx) @ w


def test_alpha_and_predictions_equal_brute_force_leave_one_out_and_closed_form(store: FeatureStore) -> None:
    videos = store.videos()
    data = SkillData.of(store, videos)
    train, test = videos[:11], videos[11:]
    predicted, alpha = ridge_predictions(data, train, test)
    rows = np.stack([store.read(v).features.astype(np.float64).mean(0) for v in videos])
    x, q = standardised(rows[:11], rows[11:])
    y = np.array([store.manifest["skill"][v]["grs"] for v in train])
    loo = []
    for a in ALPHAS:
        errors = [
            closed_form(np.delete(x, i, 0), np.delete(y, i), a, x[i : i + 1])[0] - y[i] for i in range(len(y))
        ]
        loo.append(np.mean(np.square(errors)))
    assert alpha == ALPHAS[int(np.argmin(loo))]
    assert [predicted[v] for v in test] == pytest.approx(closed_form(x, y, alpha, q), abs=1e-8)
    assert data.durations[videos[0]] == len(store.read(videos[0]).frame_times)  # 1-fps frames: N s


def test_linear_on_the_store_split_fits_train_and_scores_test(store: FeatureStore) -> None:
    results = run_skill_linear(store.root)
    test = store.manifest["splits"]["test"]
    assert sorted(results["predictions"]) == sorted(test)
    data = SkillData.of(store, store.videos())
    predicted, alpha = ridge_predictions(data, store.manifest["splits"]["train"], test)
    assert results["predictions"] == predicted and results["protocol"]["chosen_alpha"] == alpha


def test_louo_through_the_cli_tests_one_user_per_fold(store: FeatureStore, tmp_path: Path) -> None:
    out = tmp_path / "louo.json"
    args = ["cv", "--features", str(store.root), "--task", "skill", "--folds", "louo", "--json", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["task"] == "cv-linear-skill" and [f["fold"] for f in results["folds"]] == [
        f"louo-{u}" for u in USERS
    ]
    truth = {v: s["grs"] for v, s in store.manifest["skill"].items()}
    rhos, maes = [], []
    for fold in results["folds"]:
        assert {v.split("_")[1][0] for v in fold["test"]} == {fold["fold"][-1]} and len(
            fold["test"]
        ) == TRIALS
        own = skill_scores({v: results["predictions"][v] for v in fold["test"]}, truth)
        assert (
            fold["metrics"]["MAE"] == pytest.approx(own["mae"])
            and fold["metrics"]["spearman_rho"] == own["spearman_rho"]
        )
        maes.append(own["mae"])
        rhos += [] if own["spearman_rho"] is None else [own["spearman_rho"]]
    assert results["metrics"]["MAE"] == pytest.approx(np.mean(maes))
    assert results["metrics"]["spearman_rho"] == (pytest.approx(np.mean(rhos)) if rhos else None)
    pooled = skill_scores(results["predictions"], truth)
    assert results["metrics"]["spearman_rho_pooled"] == pytest.approx(pooled["spearman_rho"])
    mean_row = results["references"]["training-mean"]
    assert mean_row["metrics"]["spearman_rho"] is None and "undefined" in mean_row["note"]
    assert set(results["references"]) == {"training-mean", "duration"}


def test_loso_folds_hold_out_each_supertrial(store: FeatureStore) -> None:
    results = run_skill_cv(store.root, "loso")
    assert [f["fold"] for f in results["folds"]] == [f"loso-{k}" for k in range(1, TRIALS + 1)]
    assert all({v[-3:] for v in f["test"]} == {f["fold"][-1].zfill(3)} for f in results["folds"])
