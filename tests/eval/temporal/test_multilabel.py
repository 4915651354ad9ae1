"""The multi-label MS-TCN (`temporal/multilabel.py`): its loss equals a by-hand formulation (BCE summed entry
by entry over the annotated ones, MS-TCN's truncated MSE on a binary softmax over (0, z)); frames not
annotated and batch padding do not change it; soft targets are cross-entropy with soft labels; the fit keeps
its best validation epoch and is deterministic given the seed."""

from __future__ import annotations

import math

import numpy as np
import torch

from plstitch_eval.temporal.fit import TemporalConfig
from plstitch_eval.temporal.multilabel import fit_multilabel_tcn, multilabel_tcn_loss

S, B, K, T = 2, 2, 3, 7


def by_hand(
    logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, weight: float, tau: float
) -> float:
    """Loops over stages, entries and frame pairs; a -1 or NaN target, or a padded frame, counts nowhere."""
    total = 0.0
    for stage in logits.double():
        bce, count = 0.0, 0
        for b in range(B):
            for k in range(K):
                for t in range(T):
                    y = float(targets[b, k, t])
                    if mask[b, 0, t] == 0 or math.isnan(y) or y < 0:
                        continue
                    p = 1.0 / (1.0 + math.exp(-float(stage[b, k, t])))
                    bce -= y * math.log(p) + (1 - y) * math.log(1 - p)
                    count += 1
        total += bce / count
        squares, pairs = 0.0, 0
        for b in range(B):
            for t in range(1, T):
                if mask[b, 0, t] == 0 or mask[b, 0, t - 1] == 0:
                    continue
                pairs += 1
                for k in range(K):
                    now = torch.log_softmax(torch.stack([stage.new_zeros(()), stage[b, k, t]]), 0)
                    before = torch.log_softmax(torch.stack([stage.new_zeros(()), stage[b, k, t - 1]]), 0)
                    squares += float(torch.clamp((now - before) ** 2, max=tau**2).sum())
        total += weight * squares / (pairs * K * 2)
    return total


def example(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(S, B, K, T, generator=gen) * 3
    targets = (torch.rand(B, K, T, generator=gen) > 0.5).float()
    targets[0, :, 2] = -1.0  # a frame not annotated
    targets[1, 1, 4] = float("nan")  # one criterion not rated
    targets[1, 2, 1] = 0.4  # a soft target
    mask = torch.ones(B, 1, T)
    mask[1, :, 5:] = 0.0  # the shorter video's padding
    return logits, targets, mask


def test_the_loss_equals_bce_and_truncated_mse_written_out() -> None:
    logits, targets, mask = example()
    for weight, tau in ((0.15, 4.0), (1.0, 0.5), (0.0, 4.0)):
        got = float(multilabel_tcn_loss(logits, targets, mask, weight, tau))
        assert math.isclose(got, by_hand(logits, targets, mask, weight, tau), rel_tol=1e-5)


def test_the_bce_term_is_torchs_bce_on_the_annotated_entries() -> None:
    logits, targets, _ = example()
    mask = torch.ones(B, 1, T)
    keep = torch.isfinite(targets) & (targets >= 0)
    expected = sum(
        torch.nn.functional.binary_cross_entropy_with_logits(stage[keep], targets[keep]) for stage in logits
    )
    assert torch.isclose(multilabel_tcn_loss(logits, targets, mask, smooth_weight=0.0), expected)


def test_frames_not_annotated_and_padding_do_not_change_the_loss() -> None:
    logits, targets, mask = example()
    base = multilabel_tcn_loss(logits, targets, mask, smooth_weight=0.0)
    other = logits.clone()
    other[:, 0, :, 2] += 50.0  # the frame not annotated
    other[:, 1, 1, 4] -= 50.0  # the entry not rated
    assert torch.isclose(multilabel_tcn_loss(other, targets, mask, smooth_weight=0.0), base)
    with_smoothing = multilabel_tcn_loss(logits, targets, mask)
    padded, padded_targets = logits.clone(), targets.clone()
    padded[:, 1, :, 5:] = 99.0
    padded_targets[1, :, 5:] = 1.0
    assert torch.isclose(multilabel_tcn_loss(padded, padded_targets, mask), with_smoothing)
    changed = targets.clone()
    changed[0, :, 2] = 1.0  # annotating the frame changes it
    assert not torch.isclose(multilabel_tcn_loss(logits, changed, mask, smooth_weight=0.0), base)


def videos(seed: int, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each frame shows column k when feature k is high; a few frames not annotated (-1)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        n = int(rng.integers(12, 20))
        on = rng.random((n, K)) > 0.6
        features = np.concatenate([on * 2.0 + rng.normal(size=(n, K)), rng.normal(size=(n, 2))], 1)
        targets = on.astype(np.float32)
        targets[rng.integers(0, n)] = -1.0
        out.append((features.astype(np.float32), targets))
    return out


def test_the_fit_keeps_its_best_validation_epoch_and_repeats_itself() -> None:
    config = TemporalConfig(stages=2, layers=2, channels=8, epochs=6, lr=0.01, dropout=0.0)
    train, val = videos(0, 4), videos(1, 2)

    def score(probs: list[np.ndarray]) -> float:  # the fraction of annotated entries on the right side of 0.5
        keep = [(y >= 0).all(1) for _, y in val]
        right = [((p[k] > 0.5) == (y[k] > 0.5)).mean() for p, (_, y), k in zip(probs, val, keep, strict=True)]
        return float(np.mean(right))

    fit = fit_multilabel_tcn(train, val, score, config, progress=False)
    again = fit_multilabel_tcn(train, val, score, config, progress=False)
    assert fit.best_epoch == int(np.argmax(fit.val_scores)) + 1 and len(fit.val_scores) == 6
    assert fit.val_scores == again.val_scores
    assert score([fit.predict(x) for x, _ in val]) == max(fit.val_scores)
    assert fit.train_losses[-1] < fit.train_losses[0]
