"""Data files shipped inside the `plstitch_eval` package (the tiny model, card templates, paper numbers).

They are package data read through `importlib.resources`, so a wheel or `pip install .` finds them as well as
an editable install or a source checkout does.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

PACKAGE = "plstitch_eval"
MODEL_CARDS = "model_cards"


def package_path(*parts: str) -> Path:
    """The filesystem path of `parts` inside the installed `plstitch_eval` package.

    Why: shipped files must be found relative to the installed code, never to a repository checkout.
    """
    location = resources.files(PACKAGE)
    for part in parts:
        location = location / part
    return Path(str(location))


def model_cards_dir() -> Path:
    """The shipped `model_cards/` folder (tiny model, `modelcard_template.md`, `paper_results.json`)."""
    return package_path(MODEL_CARDS)
