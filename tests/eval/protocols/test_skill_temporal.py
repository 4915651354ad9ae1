"""The temporal skill head (`temporal/skill_head.py`, run by `protocols/skill.py`): `plstitch cv --task skill
--protocol temporal --folds loso` on a store of JIGSAWS trial names whose skill shows only in how much the
features move (their mean is the same for every video) tests each supertrial once, each fold's figures are
`skill_scores` of its predictions, beside the same reference rows as the ridge; it orders the held-out videos
where the ridge on mean-pooled features cannot; `plstitch temporal --task skill` runs on the store's split;
options the head does not take, and a store without scores, are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.metrics.skill import skill_scores
from plstitch_eval.protocols.skill import run_skill_cv
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.temporal.skill_head import SkillHeadConfig, fit_skill_head
from tests.eval.protocols.stores import write_store
from tests.eval.tasks.cli import refused

USERS, TRIALS, DIM = "BCDEFG", 3, 6
FAST = ["--epochs", "120"]
runner = CliRunner()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    """A random walk per video whose step size falls as the GRS rises (a novice's instruments wander)."""
    rng = np.random.default_rng(5)
    scores, items = {}, []
    for user in USERS:
        for trial in range(1, TRIALS + 1):
            name = f"Suturing_{user}{trial:03d}"
            grs = float(rng.integers(6, 31))
            scores[name] = {"grs": grs}
            n = int(rng.integers(20, 30))
            steps = rng.normal(size=(n, DIM)) * (0.2 + (30 - grs) / 12)
            feats = np.cumsum(steps, 0)
            feats -= feats.mean(0)  # the same mean for every video: mean pooling sees no skill
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
        "skill_names": ["grs"],
        "skill": scores,
    }
    store = FeatureStore.create(tmp_path_factory.mktemp("motion") / "store", manifest)
    for item in items:
        store.write(item)
    return store


def test_cv_loso_with_the_temporal_head_reports_rho_and_mae(store: FeatureStore, tmp_path: Path) -> None:
    out = tmp_path / "cv.json"
    args = [
        "cv",
        "--features",
        str(store.root),
        "--task",
        "skill",
        "--protocol",
        "temporal",
        "--folds",
        "loso",
    ]
    result = runner.invoke(app, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "temporal head" in result.stdout and "spearman_rho" in result.stdout
    results = json.loads(out.read_text())
    assert results["task"] == "cv-temporal-skill" and results["protocol"]["inner"] == "temporal-skill"
    truth = {v: s["grs"] for v, s in store.manifest["skill"].items()}
    assert [f["fold"] for f in results["folds"]] == ["loso-1", "loso-2", "loso-3"]
    for fold in results["folds"]:
        own = skill_scores({v: results["predictions"][v] for v in fold["test"]}, truth)
        assert fold["metrics"]["spearman_rho"] == pytest.approx(own["spearman_rho"])
        assert fold["metrics"]["MAE"] == pytest.approx(own["mae"])
    assert set(results["references"]) == {"training-mean", "duration"}
    assert results["references"]["training-mean"]["metrics"]["spearman_rho"] is None
    ridge = run_skill_cv(store.root, "loso")
    assert results["metrics"]["spearman_rho"] > 0.5 > ridge["metrics"]["spearman_rho"]


def test_the_head_is_deterministic_and_temporal_on_the_stores_split(
    store: FeatureStore, tmp_path: Path
) -> None:
    videos = store.videos()
    frames = [store.read(v).features for v in videos[:8]]
    grs = [store.manifest["skill"][v]["grs"] for v in videos[:8]]
    config = SkillHeadConfig(epochs=20)
    first, again = fit_skill_head(frames, grs, config), fit_skill_head(frames, grs, config)
    assert np.array_equal(first.predict(frames), again.predict(frames))
    out = tmp_path / "split.json"
    args = ["temporal", "--features", str(store.root), "--task", "skill", *FAST, "--json", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["task"] == "temporal-skill" and results["protocol"]["epochs"] == 120
    assert sorted(results["predictions"]) == sorted(store.manifest["splits"]["test"])
    assert set(results["metrics"]) == {"spearman_rho", "MAE"}


def test_options_it_does_not_take_and_a_store_without_scores_are_refused(
    store: FeatureStore, tmp_path: Path
) -> None:
    line = refused("temporal", "--features", str(store.root), "--task", "skill", "--stages", "2", "--causal")
    assert line.startswith("error: --stages, --causal: not with temporal --task skill")
    plain = write_store(tmp_path / "plain")
    line = refused("temporal", "--features", str(plain.root), "--task", "skill")
    assert "records no skill scores" in line
