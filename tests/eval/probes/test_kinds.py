"""Probe kinds (`probes.kinds`): the registry dispatches custom kinds; the temporal kind round-trips."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from plstitch_eval.probes import (
    ProbeError,
    TemporalProbeHead,
    kinds,
    load_probe,
    register_probe_kind,
    save_probe,
)
from tests.eval.evaluate.conftest import CLASS_NAMES
from tests.eval.probes.conftest import DIM, MANIFEST, one_line_error


def test_registry_dispatches_custom_kinds(tmp_path, monkeypatch):
    monkeypatch.setattr(kinds, "_KINDS", dict(kinds._KINDS))

    def build(settings, feature_dim, num_classes):
        head = torch.nn.Linear(feature_dim, num_classes)
        head.causal = settings["causal"]
        return head

    register_probe_kind("plain", build)
    register_probe_kind("plain", build)  # the same builder again is fine
    with pytest.raises(ProbeError, match="already registered"):
        register_probe_kind("plain", lambda s, d, c: torch.nn.Linear(d, c))
    head = build({"causal": True}, DIM, len(CLASS_NAMES))
    probe = load_probe(save_probe(tmp_path / "p", "plain", head, MANIFEST, CLASS_NAMES, {"causal": True}, {}))
    x = np.random.default_rng(0).normal(size=(5, DIM)).astype(np.float32)
    assert np.array_equal(probe.logits(x), head(torch.from_numpy(x)).detach().numpy())


try:
    from plstitch_eval.temporal import mstcn
except ImportError:  # written by another change; the temporal kind is tested once it lands
    mstcn = None
needs_mstcn = pytest.mark.skipif(mstcn is None, reason="plstitch_eval/temporal/mstcn.py does not exist yet")


@needs_mstcn
@pytest.mark.parametrize("wrap", [False, True], ids=["bare", "wrapped"])
def test_temporal_probe_round_trip(tmp_path, wrap):
    settings = {"stages": 2, "layers": 3, "channels": 8, "dropout": 0.5, "causal": True, "lr": 5e-4}
    torch.manual_seed(0)
    model = mstcn.MultiStageTCN(DIM, len(CLASS_NAMES), **{k: v for k, v in settings.items() if k != "lr"})
    model.train()  # the saved probe must run without dropout whatever mode the caller left it in
    head = TemporalProbeHead(model) if wrap else model
    folder = save_probe(
        tmp_path / "tcn", "temporal", head, MANIFEST, CLASS_NAMES, settings, {"accuracy": 1.0}
    )
    probe = load_probe(folder)
    assert probe.kind == "temporal" and probe.causal is True and probe.settings == settings
    assert isinstance(probe.head, TemporalProbeHead) and not probe.head.training
    x = np.random.default_rng(1).normal(size=(40, DIM)).astype(np.float32)
    model.eval()
    with torch.no_grad():
        want = model(torch.from_numpy(x).T[None], None)[-1, 0].T.numpy()
    assert np.array_equal(probe.logits(x), want)
    changed = x.copy()
    changed[30:] += 1.0  # causal: frames before 30 do not see the change
    assert np.array_equal(probe.logits(changed)[:30], want[:30]) and not np.allclose(
        probe.logits(changed), want
    )


@needs_mstcn
def test_temporal_settings_must_agree_with_the_model(tmp_path):
    model = mstcn.MultiStageTCN(DIM, len(CLASS_NAMES), stages=2, layers=2, channels=8, causal=False)
    settings = {"stages": 2, "layers": 2, "channels": 8, "dropout": 0.5, "causal": True}
    with pytest.raises(ProbeError) as exc:
        save_probe(tmp_path / "a", "temporal", model, MANIFEST, CLASS_NAMES, settings, {})
    assert "not causal" in one_line_error(exc)
    with pytest.raises(ProbeError) as exc:
        save_probe(
            tmp_path / "b",
            "temporal",
            model,
            MANIFEST,
            CLASS_NAMES,
            {**settings, "causal": False, "layers": 3},
            {},
        )
    assert "missing" in one_line_error(exc)
    with pytest.raises(ProbeError) as exc:
        save_probe(tmp_path / "c", "temporal", model, MANIFEST, CLASS_NAMES, {"causal": False}, {})
    assert "lack stages, layers, channels, dropout" in one_line_error(exc)
