import numpy as np
import pytest

from plstitch_eval.analysis.time_probe import normalised_time, time_probe
from plstitch_eval.errors import ConfigError
from plstitch_eval.store.features import FeatureStore, VideoFeatures


def closed_form_ridge(x_train, y_train, x_test, alpha):
    """Standardise with train stats, centre, solve (Z'Z + alpha I) w = Z'y; intercept = mean(y)."""
    mean, std = x_train.mean(0), x_train.std(0)
    z = (x_train - mean) / std
    zc = z - z.mean(0)
    w = np.linalg.solve(zc.T @ zc + alpha * np.eye(z.shape[1]), zc.T @ (y_train - y_train.mean()))
    b = y_train.mean() - z.mean(0) @ w
    return (x_test - mean) / std @ w + b


@pytest.fixture()
def time_store(tmp_path):
    rng = np.random.default_rng(0)
    manifest = {
        "dataset": "toy",
        "class_names": ["a"],
        "splits": {"train": ["v1", "v2", "v3"], "test": ["v4", "v5"]},
        "model": {"spec": "toy", "provenance": {}},
        "fps": 1.0,
    }
    store = FeatureStore.create(tmp_path / "store", manifest)
    direction = rng.normal(size=6)
    for i, n in enumerate((20, 31, 25, 18, 27), start=1):
        times = np.arange(n, dtype=np.float64) * 2.0 + 5.0
        x = np.linspace(0, 1, n)[:, None] * direction + rng.normal(size=(n, 6)) * 0.05
        store.write(VideoFeatures(f"v{i}", x.astype(np.float32), np.zeros(n, np.int64), times))
    return store


def test_normalised_time():
    np.testing.assert_allclose(normalised_time(np.array([5.0, 7.0, 9.0])), [0, 0.5, 1])
    np.testing.assert_allclose(normalised_time(np.array([3.0])), [0.0])


@pytest.mark.parametrize("alpha", [0.0, 1.0, 10.0])
def test_time_probe_matches_closed_form(time_store, alpha):
    res = time_probe(time_store.root, alpha=alpha)

    def stack(split):
        items = time_store.read_split(split)
        x = np.concatenate([v.features for v in items]).astype(np.float64)
        y = np.concatenate([np.linspace(0, 1, len(v.features)) for v in items])
        return x, y

    (xtr, ytr), (xte, yte) = stack("train"), stack("test")
    pred = closed_form_ridge(xtr, ytr, xte, alpha)
    r2 = 1 - np.sum((yte - pred) ** 2) / np.sum((yte - yte.mean()) ** 2)
    assert res["r2"] == pytest.approx(r2, abs=1e-6)
    assert res["mae"] == pytest.approx(np.abs(yte - pred).mean(), abs=1e-6)
    assert res["r2"] > 0.8 and res["n_train"] == 76 and res["n_test"] == 45


def test_time_probe_missing_split(time_store):
    with pytest.raises(ConfigError, match="val"):
        time_probe(time_store.root, test_split="val")


def test_alpha_is_chosen_by_grouped_cv_over_train_videos(time_store):
    from sklearn.model_selection import GroupKFold

    from plstitch_eval.analysis.time_probe import ALPHAS

    res = time_probe(time_store.root)
    items = time_store.read_split("train")
    x = np.concatenate([v.features for v in items]).astype(np.float64)
    y = np.concatenate([np.linspace(0, 1, len(v.features)) for v in items])
    groups = np.repeat(np.arange(len(items)), [len(v.features) for v in items])
    cv = {}
    for alpha in ALPHAS:  # independent: closed-form ridge on each fold, R^2 averaged over the folds
        r2s = []
        for tr, te in GroupKFold(n_splits=3).split(x, y, groups):
            pred = closed_form_ridge(x[tr], y[tr], x[te], alpha)
            r2s.append(1 - np.sum((y[te] - pred) ** 2) / np.sum((y[te] - y[te].mean()) ** 2))
        cv[alpha] = np.mean(r2s)
    best = max(cv.values())
    assert res["alpha"] == max(a for a, r2 in cv.items() if np.isclose(r2, best, atol=1e-12))
    assert res["cv_r2"][f"{res['alpha']:g}"] == pytest.approx(best, abs=1e-9)
    assert res["r2"] == pytest.approx(time_probe(time_store.root, alpha=res["alpha"])["r2"])


def test_high_dimensional_noise_does_not_score_below_zero_with_chosen_alpha(tmp_path):
    rng = np.random.default_rng(1)
    manifest = {
        "dataset": "toy",
        "class_names": ["a"],
        "splits": {"train": [f"t{i}" for i in range(6)], "test": ["u0", "u1"]},
        "model": {"spec": "toy", "provenance": {}},
        "fps": 1.0,
    }
    store = FeatureStore.create(tmp_path / "noise", manifest)
    for name in manifest["splits"]["train"] + manifest["splits"]["test"]:
        n = 30
        store.write(
            VideoFeatures(
                name,
                rng.normal(size=(n, 200)).astype(np.float32),
                np.zeros(n, np.int64),
                np.arange(n, dtype=np.float64),
            )
        )
    assert (
        time_probe(store.root, alpha=1.0)["r2"] < -0.1
    )  # 200 noise dims, 180 frames: a small penalty overfits
    chosen = time_probe(store.root)
    assert chosen["alpha"] >= 1e4 and chosen["r2"] > -0.1
