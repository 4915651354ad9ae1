"""init_distributed on CUDA: the device handed to torch.cuda.set_device always names a GPU index."""

from __future__ import annotations

import pytest
import torch
from torch.cuda._utils import _get_device_index

from plstitch_eval.utils.distributed import init_distributed


@pytest.fixture
def fake_cuda(monkeypatch):
    """Record set_device calls, validating them with torch's own index check (which refuses a bare 'cuda')."""
    calls = []

    def set_device(device):
        calls.append(_get_device_index(device))

    monkeypatch.setattr(torch.cuda, "set_device", set_device)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return calls


def test_bare_cuda_becomes_the_current_gpu(fake_cuda):
    info, device = init_distributed(torch.device("cuda"))
    assert device == torch.device("cuda", 3) and fake_cuda == [3] and not info.active


def test_an_explicit_index_is_kept(fake_cuda):
    _, device = init_distributed(torch.device("cuda", 1))
    assert device == torch.device("cuda", 1) and fake_cuda == [1]


def test_torch_refuses_the_bare_device():
    # the failure the fix avoids (seen on an H100 with torch 2.11): set_device(torch.device("cuda")) raises
    with pytest.raises(ValueError):
        _get_device_index(torch.device("cuda"))


def test_cpu_is_left_alone(fake_cuda):
    _, device = init_distributed(torch.device("cpu"))
    assert device == torch.device("cpu") and fake_cuda == []
