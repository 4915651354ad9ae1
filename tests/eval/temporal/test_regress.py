"""`fit_temporal_regression`: learning a per-frame target, epoch selection, determinism, causality, the loss,
the `refine` option of MultiStageTCN, and its input checks."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.temporal.fit import TemporalConfig
from plstitch_eval.temporal.mstcn import MultiStageTCN
from plstitch_eval.temporal.regress import fit_temporal_regression, regression_loss

SMALL = dict(stages=2, layers=3, channels=8, dropout=0.1, epochs=6, lr=1e-2)
DIM, K = 8, 2


def videos(n: int, seed: int = 0, outputs: int = K) -> list[tuple[np.ndarray, np.ndarray]]:
    """Smooth random-walk features [T, 8] (40-80 frames); targets = sigmoid of a fixed linear map of them."""
    weights = np.random.default_rng(99).normal(size=(DIM, outputs)) / np.sqrt(DIM)
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        frames = int(rng.integers(40, 81))
        walk = np.cumsum(rng.normal(scale=0.3, size=(frames, DIM)), axis=0)
        features = (walk - walk.mean(0)) / (walk.std(0) + 1e-6)
        out.append((features.astype(np.float32), 1 / (1 + np.exp(-2 * features @ weights))))
    return out


def mse(preds: list[np.ndarray], data) -> float:
    return float(np.mean(np.concatenate([(p - t) ** 2 for p, (_, t) in zip(preds, data, strict=True)])))


def test_learns_a_per_frame_target_better_than_the_training_mean():
    train, val, test = videos(6), videos(2, seed=1), videos(3, seed=2)
    config = TemporalConfig(**{**SMALL, "epochs": 15, "layers": 4, "channels": 16})
    fit = fit_temporal_regression(train, val, lambda p: mse(p, val), config, progress=False)
    preds = [fit.predict(x) for x, _ in test]
    mean = np.concatenate([t for _, t in train]).mean(0)
    baseline = mse([np.broadcast_to(mean, t.shape) for _, t in test], test)
    assert all(p.shape == t.shape and p.dtype == np.float64 for p, (_, t) in zip(preds, test, strict=True))
    assert mse(preds, test) < 0.3 * baseline  # ~0.13 x


def test_keeps_the_epoch_with_the_lowest_validation_error():
    train, val = videos(4), videos(2, seed=1)
    seen: list[list[np.ndarray]] = []

    def val_error(preds: list[np.ndarray]) -> float:
        seen.append(preds)
        return mse(preds, val)

    fit = fit_temporal_regression(train, val, val_error, TemporalConfig(**SMALL, seed=3), progress=False)
    assert len(seen) == len(fit.val_scores) == len(fit.train_losses) == SMALL["epochs"]
    assert fit.best_epoch == int(np.argmin(fit.val_scores)) + 1  # ties: the earliest
    assert fit.val_scores == [mse(p, val) for p in seen]
    assert not fit.model.training and fit.threads == 1 and fit.device == "cpu"
    for recorded, (x, _) in zip(seen[fit.best_epoch - 1], val, strict=True):
        np.testing.assert_array_equal(fit.predict(x), recorded)


def test_is_deterministic_per_seed_and_leaves_the_global_generator_alone():
    train, val = videos(3), videos(2, seed=1)
    state = torch.get_rng_state()
    runs = [
        fit_temporal_regression(
            train, val, lambda p: mse(p, val), TemporalConfig(**SMALL, seed=s, batch_size=2), progress=False
        )
        for s in (0, 0, 1)
    ]
    assert torch.equal(torch.get_rng_state(), state)
    a, b, c = (run.predict(val[0][0]) for run in runs)
    assert np.array_equal(a, b) and runs[0].train_losses == runs[1].train_losses
    assert not np.array_equal(a, c)


def test_causal_predictions_ignore_later_frames():
    train, val = videos(3), videos(1, seed=1)
    fit = fit_temporal_regression(
        train, val, lambda p: mse(p, val), TemporalConfig(**SMALL, causal=True), progress=False
    )
    x = val[0][0]
    changed = x.copy()
    changed[30:] = np.random.default_rng(5).normal(size=changed[30:].shape)
    before, after = fit.predict(x), fit.predict(changed)
    np.testing.assert_array_equal(before[:30], after[:30])
    assert not np.allclose(before[30:], after[30:])


def test_loss_counts_real_frames_only():
    """Two padded videos: per-stage MSE over real frames x K + 0.5 x squared change of real frame pairs."""
    rng = np.random.default_rng(0)
    outputs, targets = rng.normal(size=(2, 2, K, 6)), rng.uniform(size=(2, K, 6))
    mask = np.ones((2, 1, 6))
    mask[1, :, 4:] = 0
    real = [(b, t) for b in range(2) for t in range(6) if mask[b, 0, t]]
    pairs = [(b, t) for b, t in real if t > 0]
    expected = 0.0
    for z in outputs:
        expected += np.mean([(z[b, :, t] - targets[b, :, t]) ** 2 for b, t in real])
        expected += 0.5 * np.mean([np.minimum((z[b, :, t] - z[b, :, t - 1]) ** 2, 0.25) for b, t in pairs])
    loss = regression_loss(*(torch.tensor(a) for a in (outputs, targets, mask)), smooth_weight=0.5, tau=0.5)
    assert loss.item() == pytest.approx(expected)


def test_refine_softmax_is_the_default_and_sigmoid_changes_only_later_stages():
    x, mask = torch.randn(2, 5, 30), torch.ones(2, 1, 30)
    mask[1, :, 20:] = 0
    outputs = []
    for kwargs in ({}, {"refine": "softmax"}, {"refine": "sigmoid"}):
        torch.manual_seed(7)
        model = MultiStageTCN(5, 3, stages=3, layers=3, channels=8, **kwargs).eval()
        outputs.append(model(x, mask))
    assert torch.equal(outputs[0], outputs[1])
    assert torch.equal(outputs[2][0], outputs[0][0]) and not torch.allclose(outputs[2][1:], outputs[0][1:])
    with pytest.raises(ConfigError, match="refine must be softmax or sigmoid, got 'tanh'"):
        MultiStageTCN(5, 3, refine="tanh")


def test_bad_inputs_are_refused_in_one_line():
    train, val = videos(2), videos(1, seed=1)
    nan_targets = (train[1][0], np.full_like(train[1][1], np.nan))

    def fit(tr, va):
        return fit_temporal_regression(tr, va, lambda p: 0.0, TemporalConfig(**SMALL), progress=False)

    cases = [
        ([], val, "No training videos"),
        (train, [], "No validation videos"),
        (train, videos(1, outputs=3), r"targets K\): \[\(8, 2\), \(8, 3\)\]"),
        (train, [(np.zeros((5, 4), np.float32), np.zeros((5, K)))], r"\[\(4, 2\), \(8, 2\)\]"),
        (train, [(val[0][0], val[0][1][:-1])], "Validation video 0: features"),
        (train, [(val[0][0], val[0][1][:, 0])], "Validation video 0: features"),
        ([train[0], nan_targets], val, "Training video 1 has non-finite"),
    ]
    for tr, va, message in cases:
        with pytest.raises(EvaluationError, match=message) as info:
            fit(tr, va)
        assert "\n" not in str(info.value)
    with pytest.raises(EvaluationError, match="val_error gave nan after epoch 1"):
        fit_temporal_regression(train, val, lambda p: float("nan"), TemporalConfig(**SMALL), progress=False)
