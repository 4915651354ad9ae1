"""Linear-probe grid: learns separable data, stays at chance on shuffled labels, grid == heads alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.linear_grid import LinearConfig, class_weights, fit_linear_probe, train_linear_grid

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


def _torch_reference_head(x, y, num_classes, config, lr0, wd, weights=None):
    """One head trained with nn.Linear, autograd and torch.optim, replaying the grid's batches and init.

    Same generator use as the grid (init weights first, then one randperm per epoch), standardised
    features, weighted mean cross-entropy, cosine lr per step to 0, no weight decay on the bias.
    """
    gen = torch.Generator().manual_seed(config.seed)
    n, dim = x.shape
    init = torch.randn(dim, 1, num_classes, generator=gen)[:, 0] * 0.01
    xt = torch.from_numpy(x).double()
    xt = (xt - xt.mean(0)) / xt.std(0, unbiased=False).clamp_min(1e-6)
    yt = torch.from_numpy(y)
    sample_w = torch.ones(num_classes, dtype=torch.float64) if weights is None else weights
    linear = torch.nn.Linear(dim, num_classes).double()
    with torch.no_grad():
        linear.weight.copy_(init.T)
        linear.bias.zero_()
    groups = [{"params": [linear.weight], "weight_decay": wd}, {"params": [linear.bias], "weight_decay": 0.0}]
    if config.optimizer == "sgd":
        optimizer = torch.optim.SGD(groups, lr=lr0, momentum=config.momentum)
    else:
        optimizer = torch.optim.AdamW(groups, lr=lr0, betas=(0.9, 0.999), eps=1e-8)
    steps_per_epoch = -(-n // config.batch_size)
    total, step = config.epochs * steps_per_epoch, 0
    for _epoch in range(config.epochs):
        order = torch.randperm(n, generator=gen)
        for start in range(0, n, config.batch_size):
            idx = order[start : start + config.batch_size]
            w = sample_w[yt[idx]]
            nll = torch.nn.functional.cross_entropy(linear(xt[idx]), yt[idx], reduction="none")
            loss = (nll * w).sum() / w.sum()
            for group in optimizer.param_groups:
                group["lr"] = lr0 * 0.5 * (1.0 + np.cos(np.pi * step / total))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
    return linear.weight.detach().T.float(), linear.bias.detach().float()


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_each_grid_head_equals_torch_optim_on_nn_linear(optimizer):
    """Every (lr, wd) head = nn.Linear + autograd + torch.optim.SGD(momentum, wd) / AdamW, same batches.

    Catches a wrong hand-written gradient, a flipped weight-decay sign, coupled/decoupled decay mixed up,
    a dropped Adam bias correction or a momentum buffer that is not accumulated.
    """
    x, y = blobs(n=200, classes=4, dim=6, seed=1, spread=1.0)
    config = LinearConfig(
        lrs=(0.05, 0.5), weight_decays=(0.0, 0.1), optimizer=optimizer, epochs=3, batch_size=64, device="cpu"
    )
    grid = train_linear_grid(x, y, 4, config)
    assert grid.heads == [(0.05, 0.0), (0.05, 0.1), (0.5, 0.0), (0.5, 0.1)]
    for head, (lr, wd) in enumerate(grid.heads):
        weight, bias = _torch_reference_head(x, y, 4, config, lr, wd)
        torch.testing.assert_close(grid.weight[:, head], weight, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(grid.bias[head], bias, rtol=1e-4, atol=1e-5)


def test_balanced_grid_head_equals_torch_weighted_cross_entropy():
    """Class-balanced gradient = autograd of the sample-weighted mean cross-entropy."""
    x, y = blobs(n=150, classes=3, dim=5, seed=2, spread=1.0)
    y[:100] = 0  # imbalanced, so the weights matter
    config = LinearConfig(
        lrs=(0.3,), weight_decays=(0.01,), epochs=2, batch_size=40, balance_classes=True, device="cpu"
    )
    grid = train_linear_grid(x, y, 3, config)
    weights = torch.from_numpy(class_weights(y, 3)).double()
    weight, bias = _torch_reference_head(x, y, 3, config, 0.3, 0.01, weights)
    torch.testing.assert_close(grid.weight[:, 0], weight, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grid.bias[0], bias, rtol=1e-4, atol=1e-5)


def test_standardisation_uses_the_training_statistics():
    """The stored mean/std are the training frames' (population std), and any split is predicted with them.

    Checked against logits written here with numpy on a test set of another mean and scale: a probe that
    standardised the frames it predicts with their own statistics would give other logits.
    """
    x, y = blobs(n=400, classes=3, dim=6, seed=4, spread=2.0)
    x = x * np.array([1.0, 5.0, 0.2, 1.0, 3.0, 1.0], np.float32) + 2.0  # unequal scales, non-zero mean
    grid = train_linear_grid(x, y, 3, LinearConfig(lrs=(0.1, 0.5), weight_decays=(0.0,), **FAST))
    mean, std = x.astype(np.float64).mean(0), x.astype(np.float64).std(0)  # ddof=0
    np.testing.assert_allclose(grid.mean.numpy(), mean, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(grid.std.numpy(), std, rtol=1e-5)

    shifted = (x[:50] * 0.5 + 7.0).astype(np.float32)  # another split: other mean and scale
    weight, bias = grid.weight.numpy().astype(np.float64), grid.bias.numpy().astype(np.float64)
    z = (shifted - mean) / std
    want = np.stack([z @ weight[:, h] + bias[h] for h in range(grid.num_heads)])
    np.testing.assert_allclose(grid.logits(shifted), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grid.logits(shifted[:1], head=1), want[1, :1], rtol=1e-4, atol=1e-4)


def test_shifted_test_split_is_predicted_with_training_standardisation():
    """Class = sign of x0 in training; a test split with every x0 in [2, 4] is class 1 throughout.

    With the training statistics every test frame lands on the positive side; standardising the test split
    with its own mean would put half of it on the negative side.
    """
    rng = np.random.default_rng(5)
    x_train = rng.uniform(-1, 1, size=(600, 2)).astype(np.float32)
    y_train = (x_train[:, 0] > 0).astype(np.int64)
    x_test = np.stack([rng.uniform(2, 4, 200), rng.uniform(-1, 1, 200)], 1).astype(np.float32)
    probe = fit_linear_probe(
        x_train,
        y_train,
        x_train[:100],
        y_train[:100],
        2,
        LinearConfig(lrs=(0.5,), weight_decays=(0.0,), **FAST),
    )
    assert (probe.predict(x_test) == 1).all()
