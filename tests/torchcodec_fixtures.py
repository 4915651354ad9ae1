"""TorchCodec fixtures shared by the decoding, extraction and training tests (a plugin of tests/conftest.py):
fresh detection per test, and a skip (with the reason) where TorchCodec cannot load on this machine."""

from __future__ import annotations

import pytest

from plstitch_eval.data import torchcodec_decode


@pytest.fixture
def fresh_torchcodec_detection():
    """Each test detects TorchCodec afresh (some hide it), and leaves no cached answer behind; a module asks
    for it with `pytestmark = pytest.mark.usefixtures("fresh_torchcodec_detection")`."""
    torchcodec_decode.unavailable_reason.cache_clear()
    yield
    torchcodec_decode.unavailable_reason.cache_clear()


@pytest.fixture
def torchcodec_ready() -> None:
    """Skip unless TorchCodec imports and finds a usable FFmpeg."""
    pytest.importorskip("torchcodec")
    reason = torchcodec_decode.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
