"""Linear-probe grid: learns separable data, stays at chance on shuffled labels, grid == heads alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.linear import LinearConfig, class_weights, fit_linear_probe, train_linear_grid

FAST = {"epochs": 8, "batch_size": 256, "device": "cpu"}


def blobs(n=1500, classes=5, dim=24, seed=0, spread=4.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(classes, dim)) * spread
    labels = rng.integers(0, classes, n)
    return (centres[labels] + rng.normal(size=(n, dim))).astype(np.float32), labels


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_separable_data_is_learned(optimizer):
    x, y = blobs()
    probe = fit_linear_probe(
        x[:1000], y[:1000], x[1000:1200], y[1000:1200], 5, LinearConfig(optimizer=optimizer, **FAST)
    )
    assert max(probe.val_scores) > 99.0
    assert (probe.predict(x[1200:]) == y[1200:]).mean() > 0.99
    assert probe.best_lr in probe.grid.heads[probe.best_head]


def test_shuffled_labels_stay_near_chance():
    x, y = blobs(n=3000)
    y = np.random.default_rng(1).permutation(y)
    probe = fit_linear_probe(x[:2000], y[:2000], x[2000:2500], y[2000:2500], 5, LinearConfig(**FAST))
    test_acc = (probe.predict(x[2500:]) == y[2500:]).mean() * 100
    assert test_acc < 35.0  # chance is 20%


def test_grid_head_equals_head_trained_alone():
    x, y = blobs(n=600)
    grid = train_linear_grid(x, y, 5, LinearConfig(lrs=(0.01, 0.1), weight_decays=(0.0, 1e-3), **FAST))
    alone = train_linear_grid(x, y, 5, LinearConfig(lrs=(0.1,), weight_decays=(1e-3,), **FAST))
    assert grid.heads[3] == (0.1, 1e-3)
    torch.testing.assert_close(grid.weight[:, 3], alone.weight[:, 0], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(grid.bias[3], alone.bias[0], atol=1e-5, rtol=1e-4)
    assert not torch.allclose(grid.weight[:, 0], grid.weight[:, 3])


def test_deterministic_given_seed():
    x, y = blobs(n=500)
    cfg = LinearConfig(lrs=(0.05,), weight_decays=(0.0,), balance_classes=True, **FAST)
    a, b = train_linear_grid(x, y, 5, cfg), train_linear_grid(x, y, 5, cfg)
    assert torch.equal(a.weight, b.weight) and torch.equal(a.bias, b.bias)
    c = train_linear_grid(x, y, 5, LinearConfig(lrs=(0.05,), weight_decays=(0.0,), seed=1, **FAST))
    assert not torch.equal(a.weight, c.weight)


def test_class_weights_inverse_frequency():
    w = class_weights(np.array([0, 0, 0, 1, 2, 2]), 4)
    np.testing.assert_allclose(w, [6 / 9, 2.0, 1.0, 0.0])


def test_balanced_loss_helps_rare_class():
    rng = np.random.default_rng(0)
    y = np.where(rng.random(2000) < 0.03, 1, 0)
    x = (y[:, None] * 1.0 + rng.normal(size=(2000, 2)) * 0.8).astype(np.float32)
    cfg = {"lrs": (0.1,), "weight_decays": (0.0,), **FAST}
    plain = train_linear_grid(x, y, 2, LinearConfig(**cfg)).predict(x, 0)
    balanced = train_linear_grid(x, y, 2, LinearConfig(balance_classes=True, **cfg)).predict(x, 0)
    assert (balanced[y == 1] == 1).mean() > (plain[y == 1] == 1).mean()


def test_bad_inputs():
    x, y = blobs(n=100)
    x[5, 0] = np.inf
    with pytest.raises(EvaluationError, match="NaN or inf"):
        train_linear_grid(x, y, 5, LinearConfig(**FAST))
    with pytest.raises(EvaluationError, match="labels"):
        train_linear_grid(x[:10], y[:9], 5, LinearConfig(**FAST))


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"optimizer": "lbfgs"}, "optimizer 'lbfgs' unknown; choose one of sgd, adamw"),
        ({"select_metric": "auc"}, "select_metric 'auc' unknown; choose one of accuracy, macro_f1"),
        ({"lrs": ()}, "lrs and weight_decays need at least one value"),
        ({"lrs": (0.1, 0.0)}, "lrs must be > 0"),
        ({"weight_decays": (-1e-4,)}, "weight_decays >= 0"),
        ({"epochs": 0}, "epochs and batch_size must be >= 1"),
        ({"momentum": 1.0}, r"momentum must be in \[0, 1\)"),
        ({"num_threads": 0}, "num_threads must be >= 1"),
    ],
)
def test_config_is_checked_on_construction(changes, message):
    with pytest.raises(ConfigError, match=message) as info:
        LinearConfig(**changes)
    assert "\n" not in str(info.value)
