"""`fit_temporal` against MS-TCN's training loop written out here, epoch selection, determinism, config."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.metrics import frame_accuracy
from plstitch_eval.store.features import VideoFeatures
from plstitch_eval.temporal.fit import TemporalConfig, fit_temporal, predict_video, video_logits
from plstitch_eval.temporal.mstcn import MultiStageTCN

SMALL = dict(stages=2, layers=3, channels=8, epochs=3, lr=1e-2)


def videos(n: int, dim: int = 6, classes: int = 3, seed: int = 0) -> list[VideoFeatures]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        frames = int(rng.integers(12, 20))
        labels = np.sort(rng.integers(0, classes, frames))
        labels[int(rng.integers(0, frames))] = -1  # an unlabelled frame
        feats = rng.normal(size=(frames, dim)) + np.where(labels[:, None] >= 0, labels[:, None], 0)
        out.append(VideoFeatures(f"v{i}", feats.astype(np.float32), labels, np.arange(frames, dtype=float)))
    return out


def ms_tcn_reference(train, config: TemporalConfig, classes: int) -> list[dict]:
    """MS-TCN's main.py/model.py training loop (mask [B, C, T], loss as in their Trainer), one video per
    step, in the order a torch.Generator(seed) permutes each epoch; the weights after every epoch."""
    torch.manual_seed(config.seed)
    model = MultiStageTCN(train[0].features.shape[1], classes, config.stages, config.layers, config.channels)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    ce, mse = torch.nn.CrossEntropyLoss(ignore_index=-100), torch.nn.MSELoss(reduction="none")
    gen = torch.Generator().manual_seed(config.seed)
    states = []
    for _ in range(config.epochs):
        model.train()
        for i in torch.randperm(len(train), generator=gen).tolist():
            x = torch.tensor(train[i].features.T[None])
            y = torch.tensor(np.where(train[i].labels < 0, -100, train[i].labels)[None])
            mask = torch.ones(1, classes, x.shape[2])
            optimizer.zero_grad()
            predictions = model(x, mask)
            loss = 0
            for p in predictions:
                loss += ce(p.transpose(2, 1).contiguous().view(-1, classes), y.view(-1))
                loss += 0.15 * torch.mean(
                    torch.clamp(
                        mse(F.log_softmax(p[:, :, 1:], dim=1), F.log_softmax(p.detach()[:, :, :-1], dim=1)),
                        min=0,
                        max=16,
                    )
                    * mask[:, :, 1:]
                )
            loss.backward()
            optimizer.step()
        states.append({k: v.clone() for k, v in model.state_dict().items()})
    return states


def test_fit_trains_as_ms_tcn_and_keeps_the_best_validation_epoch():
    train, val = videos(4), videos(2, seed=1)
    config = TemporalConfig(**SMALL, seed=3)
    fit = fit_temporal(train, val, 3, config, progress=False)
    states = ms_tcn_reference(train, config, 3)
    assert len(fit.val_scores) == len(fit.train_losses) == config.epochs
    assert fit.best_epoch == int(np.argmax(fit.val_scores)) + 1  # ties: the earliest
    for key, value in fit.model.state_dict().items():
        torch.testing.assert_close(value, states[fit.best_epoch - 1][key], rtol=1e-5, atol=1e-6)
    assert not fit.model.training
    preds = [predict_video(fit.model, it.features) for it in val]
    assert frame_accuracy(preds, [it.labels for it in val]) == pytest.approx(
        fit.val_scores[fit.best_epoch - 1]
    )
    logits = video_logits(fit.model, val[0].features)
    assert logits.shape == (3, len(val[0].labels)) and np.array_equal(logits.argmax(0).numpy(), preds[0])


def test_fit_is_deterministic_and_leaves_the_global_generator_alone():
    train, val = videos(3), videos(2, seed=1)
    state = torch.get_rng_state()
    a = fit_temporal(train, val, 3, TemporalConfig(**SMALL), progress=False)
    assert torch.equal(torch.get_rng_state(), state)
    b = fit_temporal(train, val, 3, TemporalConfig(**SMALL), progress=False)
    c = fit_temporal(train, val, 3, TemporalConfig(**SMALL, seed=1), progress=False)
    assert a.train_losses == b.train_losses and a.val_scores == b.val_scores
    assert all(torch.equal(v, b.model.state_dict()[k]) for k, v in a.model.state_dict().items())
    assert a.train_losses != c.train_losses


def test_batches_of_videos_are_padded_and_masked():
    train, val = videos(5), videos(2, seed=1)
    fit = fit_temporal(train, val, 3, TemporalConfig(**SMALL, batch_size=2), progress=False)
    assert np.isfinite(fit.train_losses).all() and len(fit.val_scores) == 3


def test_select_on_edit_and_macro_f1():
    train, val = videos(3), videos(2, seed=1)
    for metric in ("edit", "macro_f1"):
        fit = fit_temporal(train, val, 3, TemporalConfig(**SMALL, select_metric=metric), progress=False)
        assert all(0 <= s <= 100 for s in fit.val_scores)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stages", 0),
        ("epochs", 0),
        ("dropout", 1.0),
        ("lr", 0.0),
        ("select_metric", "loss"),
        ("precision", "x"),
    ],
)
def test_config_checks_itself(field, value):
    with pytest.raises(ConfigError, match=field):
        TemporalConfig(**{field: value})


def test_bad_inputs_are_refused():
    train, val = videos(2), videos(1, seed=1)
    with pytest.raises(EvaluationError, match="validation"):
        fit_temporal(train, [], 3, progress=False)
    with pytest.raises(EvaluationError, match="label 2 but the probe has 2 classes"):
        fit_temporal(train, val, 2, progress=False)
    other = VideoFeatures("w", np.zeros((5, 4), np.float32), np.zeros(5, np.int64), np.arange(5.0))
    with pytest.raises(EvaluationError, match="different sizes"):
        fit_temporal(train, [other], 3, progress=False)
