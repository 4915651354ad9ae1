"""Shared fixtures: everything offline, tiny and generated in temp dirs."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("OMP_NUM_THREADS", "2")

import pytest  # noqa: E402
import torch  # noqa: E402

pytest_plugins = ["tests.torchcodec_fixtures"]  # torchcodec_ready, fresh_torchcodec_detection


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)
