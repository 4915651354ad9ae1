"""The assertion every section test shares: a bad value is refused in one line that names the field."""

from __future__ import annotations

from typing import Any

import pytest

from plstitch_eval.errors import ConfigError


def refused(section: type, field: str, **values: Any) -> str:
    """Build `section(**values)`, expect a one-line ConfigError naming `field`; return the message."""
    with pytest.raises(ConfigError) as caught:
        section(**values)
    message = str(caught.value)
    assert field in message and "\n" not in message, message
    return message
