"""Fixtures of the data tests: a private plstitch cache so nothing touches the user's cache folder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLSTITCH_CACHE", str(tmp_path_factory.getbasetemp() / "plstitch-cache"))
