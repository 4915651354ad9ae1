"""A loaded probe (`probes.probe.Probe`): its logits refuse features of another dim."""

from __future__ import annotations

import numpy as np
import pytest

from plstitch_eval.probes import ProbeError, load_probe
from tests.eval.evaluate.conftest import CLASS_NAMES
from tests.eval.probes.conftest import DIM, one_line_error, save_random


def test_logits_refuse_features_of_another_dim(tmp_path):
    probe = load_probe(save_random(tmp_path / "probe"))
    with pytest.raises(ProbeError) as exc:
        probe.logits(np.zeros((3, DIM + 1), np.float32))
    assert f"[frames, {DIM}]" in one_line_error(exc)
    assert probe.logits(np.zeros((0, DIM), np.float32)).shape == (0, len(CLASS_NAMES))
