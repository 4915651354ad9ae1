import argparse
import os
import pickle

import pytest
import torch
from safetensors.torch import save_file

from plstitch_eval.errors import UnsafeCheckpointError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.safe_load import load_checkpoint
from tests.eval.hub.conftest import make_tiny_vit


class _Exploit:
    """Pickles to a call of os.system that would create a marker file when unpickled."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    bad = tmp_path / "evil.pth"
    with bad.open("wb") as handle:
        pickle.dump({"teacher": {"x": _Exploit(marker)}}, handle)
    with pytest.raises(UnsafeCheckpointError, match="evil.pth") as info:
        load_encoder(str(bad))
    assert "--trust-pickle" in str(info.value)
    assert not marker.exists()


def test_torch_saved_exploit_is_refused(tmp_path):
    marker = tmp_path / "pwned2"
    bad = tmp_path / "evil2.bin"
    torch.save({"model": make_tiny_vit().state_dict(), "hook": _Exploit(marker)}, bad)
    with pytest.raises(UnsafeCheckpointError, match="evil2.bin"):
        load_checkpoint(bad)
    assert not marker.exists()


def test_plain_data_extras_load_without_trust(tmp_path):
    path = tmp_path / "ok.pth"
    torch.save(
        {"teacher": {"w": torch.ones(2)}, "args": argparse.Namespace(arch="vit_base"), "epoch": 3}, path
    )
    loaded = load_checkpoint(path)
    assert loaded["args"].arch == "vit_base" and torch.equal(loaded["teacher"]["w"], torch.ones(2))


def test_safetensors_file_loads(tmp_path):
    model = make_tiny_vit()
    path = tmp_path / "weights.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    encoder = load_encoder(str(path))
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(encoder(x), model.forward_features(x)[:, 0])


class Harmless:
    """A custom class: needs code import to unpickle, so refused unless the user trusts the file."""

    def __init__(self, value):
        self.value = value


def test_trust_pickle_is_the_only_override(tmp_path):
    path = tmp_path / "custom.pt"
    torch.save({"model": make_tiny_vit().state_dict(), "meta": Harmless(5)}, path)
    with pytest.raises(UnsafeCheckpointError, match="custom.pt"):
        load_encoder(str(path))
    encoder = load_encoder(str(path), trust_pickle=True)
    assert encoder.feature_dim == 64


def test_numpy_extras_load_without_trust(tmp_path):
    import numpy as np

    path = tmp_path / "np.pth"
    extras = {"best_acc": np.float64(0.5), "rng": np.arange(3), "dtype": np.dtype("float32")}
    torch.save({"model": make_tiny_vit().state_dict(), **extras}, path)
    loaded = load_checkpoint(path)
    assert loaded["best_acc"] == 0.5 and loaded["rng"].tolist() == [0, 1, 2]
