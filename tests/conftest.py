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


@pytest.fixture(autouse=True)
def _plstitch_log_reaches_caplog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with the `plstitch` logger propagating, so `caplog` sees its records.

    Why: a CLI run earlier in the same process calls `setup_logging`, which stops propagation; whether a
    test's caplog saw the warnings then depended on the order the tests ran in.
    """
    from plstitch_eval.utils.console import logger

    monkeypatch.setattr(logger, "propagate", True)
