"""MultiStageTCN against a numpy formulation written here (shifted-tap sums, float64), MS-TCN's module names
and initialisation order, causality, and `mstcn_loss` against a hand computation."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from plstitch_eval.errors import ConfigError
from plstitch_eval.temporal.mstcn import MultiStageTCN, mstcn_loss, receptive_field


def _conv1x1(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x [B, I, T], w [O, I, 1] -> [B, O, T]."""
    return np.einsum("oi,bit->bot", w[:, :, 0], x) + b[None, :, None]


def _shift(x: np.ndarray, offset: int) -> np.ndarray:
    """y[..., t] = x[..., t + offset], zero outside the sequence."""
    y = np.zeros_like(x)
    frames = x.shape[-1]
    if offset >= 0:
        y[..., : frames - offset] = x[..., offset:]
    else:
        y[..., -offset:] = x[..., : frames + offset]
    return y


def _dilated(x: np.ndarray, w: np.ndarray, b: np.ndarray, d: int, causal: bool) -> np.ndarray:
    """Kernel-3 dilated conv as a sum of taps: taps at t-d, t, t+d (causal: t-2d, t-d, t)."""
    offsets = (-2 * d, -d, 0) if causal else (-d, 0, d)
    return (
        sum(np.einsum("oi,bit->bot", w[:, :, k], _shift(x, off)) for k, off in enumerate(offsets))
        + b[None, :, None]
    )


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def reference_forward(sd: dict, x: np.ndarray, mask: np.ndarray, stages: int, layers: int, causal: bool):
    """MS-TCN (model.py semantics) from a state dict with its key names, in float64 numpy."""
    p = {k: v.detach().double().numpy() for k, v in sd.items()}
    outs = []
    inp = x
    for s in range(stages):
        pre = "stage1." if s == 0 else f"stages.{s - 1}."
        h = _conv1x1(inp, p[pre + "conv_1x1.weight"], p[pre + "conv_1x1.bias"])
        for i in range(layers):
            lp = f"{pre}layers.{i}."
            z = np.maximum(
                _dilated(h, p[lp + "conv_dilated.weight"], p[lp + "conv_dilated.bias"], 2**i, causal), 0
            )
            z = _conv1x1(z, p[lp + "conv_1x1.weight"], p[lp + "conv_1x1.bias"])
            h = (h + z) * mask
        out = _conv1x1(h, p[pre + "conv_out.weight"], p[pre + "conv_out.bias"]) * mask
        outs.append(out)
        inp = _softmax(out) * mask
    return np.stack(outs)


@pytest.mark.parametrize("stages", [1, 2])
@pytest.mark.parametrize("causal", [False, True])
def test_forward_matches_the_numpy_formulation(stages, causal):
    torch.manual_seed(1)
    model = MultiStageTCN(5, 4, stages=stages, layers=3, channels=6, causal=causal).eval()
    x = torch.randn(2, 5, 19)
    mask = torch.ones(2, 1, 19)
    mask[1, :, 13:] = 0  # the second video is 13 frames long, padded as MS-TCN's batch_gen pads
    x[1, :, 13:] = 0
    with torch.no_grad():
        got = model(x, mask)
    want = reference_forward(model.state_dict(), x.double().numpy(), mask.double().numpy(), stages, 3, causal)
    assert got.shape == (stages, 2, 4, 19)
    np.testing.assert_allclose(got.double().numpy(), want, rtol=1e-5, atol=1e-5)
    with torch.no_grad():  # no mask = every frame is real
        np.testing.assert_allclose(model(x[:1]).numpy(), model(x[:1], torch.ones(1, 1, 19)).numpy())


def test_state_dict_keys_and_init_order_are_ms_tcn_s():
    stages, layers, dim, f, c = 3, 2, 7, 5, 4
    torch.manual_seed(0)
    model = MultiStageTCN(dim, c, stages=stages, layers=layers, channels=f)
    # MS-TCN builds stage1 (conv_1x1, layers' conv_dilated + conv_1x1, conv_out), then stages 2..S the same
    torch.manual_seed(0)
    expected = {}
    for s in range(stages):
        pre, d_in = ("stage1.", dim) if s == 0 else (f"stages.{s - 1}.", c)
        expected[pre + "conv_1x1"] = nn.Conv1d(d_in, f, 1)
        for i in range(layers):
            expected[f"{pre}layers.{i}.conv_dilated"] = nn.Conv1d(f, f, 3, padding=2**i, dilation=2**i)
            expected[f"{pre}layers.{i}.conv_1x1"] = nn.Conv1d(f, f, 1)
        expected[pre + "conv_out"] = nn.Conv1d(f, c, 1)
    want = {f"{name}.{p}": t for name, conv in expected.items() for p, t in conv.state_dict().items()}
    got = model.state_dict()
    assert list(got) == list(want)
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0)
    MultiStageTCN(dim, c, stages=stages, layers=layers, channels=f, causal=True).load_state_dict(
        want, strict=True
    )


@pytest.mark.parametrize("causal", [True, False])
def test_causal_output_never_sees_the_future(causal):
    torch.manual_seed(0)
    model = MultiStageTCN(8, 5, stages=3, layers=4, channels=8, causal=causal).eval()
    x = torch.randn(1, 8, 50)
    t = 20
    changed = x.clone()
    changed[:, :, t + 1 :] = torch.randn(1, 8, 50 - t - 1) * 3
    with torch.no_grad():
        before, after = model(x), model(changed)
    same_past = torch.equal(before[..., : t + 1], after[..., : t + 1])
    assert same_past is causal
    if causal:
        assert not torch.equal(before[..., t + 1 :], after[..., t + 1 :])  # the future inputs do matter later
        # and the past does matter: the receptive field reaches back 2^(L+1)-2 frames per stage
        shifted = x.clone()
        shifted[:, :, t - 3] += 1.0
        with torch.no_grad():
            assert not torch.equal(model(shifted)[..., t], before[..., t])
    assert receptive_field(4) == 31


def test_bad_sizes_and_inputs_are_refused():
    with pytest.raises(ConfigError, match="layers"):
        MultiStageTCN(4, 3, layers=0)
    with pytest.raises(ConfigError, match="dropout"):
        MultiStageTCN(4, 3, dropout=1.0)
    with pytest.raises(ConfigError, match=r"\[batch, 4, frames\]"):
        MultiStageTCN(4, 3)(torch.randn(1, 10, 4))


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def test_loss_matches_a_hand_computation():
    rng = np.random.default_rng(0)
    stages, batch, classes, frames = 2, 2, 4, 9
    logits = rng.normal(size=(stages, batch, classes, frames)) * 3
    logits[0, 0, :, 4] += np.array([12.0, -12.0, 0, 0])  # a jump big enough for the clamp at tau^2 = 16
    labels = rng.integers(0, classes, size=(batch, frames))
    labels[0, 2] = -1  # unlabelled
    labels[1, 6:] = -100  # batch padding
    mask = np.ones((batch, 1, frames))
    mask[1, :, 6:] = 0
    want = 0.0
    for s in range(stages):
        logp = _log_softmax(logits[s])
        nll = [-logp[b, labels[b, t], t] for b in range(batch) for t in range(frames) if labels[b, t] >= 0]
        squared = (logp[:, :, 1:] - logp[:, :, :-1]) ** 2
        assert squared.max() > 16
        smooth = (np.minimum(squared, 16.0) * mask[:, :, 1:]).sum() / (batch * classes * (frames - 1))
        want += np.mean(nll) + 0.15 * smooth
    got = mstcn_loss(torch.tensor(logits), torch.tensor(labels), torch.tensor(mask))
    assert got.item() == pytest.approx(want, rel=1e-10)
    no_smooth = mstcn_loss(torch.tensor(logits), torch.tensor(labels), torch.tensor(mask), smooth_weight=0)
    assert no_smooth.item() < got.item()


def test_smoothing_gradient_flows_into_the_later_frame_only():
    """MS-TCN detaches the earlier frame of each pair: the first frame gets no smoothing gradient."""
    logits = torch.randn(1, 1, 3, 6, requires_grad=True)
    labels = torch.full((1, 6), -1)
    labels[0, 5] = 2  # cross-entropy touches the last frame only
    mstcn_loss(logits, labels).backward()
    assert torch.all(logits.grad[..., 0] == 0)
    assert torch.all(logits.grad[..., 1:5].abs().sum(-2) > 0)
