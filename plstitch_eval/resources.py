"""Data files shipped with plstitch (the tiny model, card templates, paper numbers).

They live in the repository's top-level `model_cards/` folder, which the wheel installs as the package
`plstitch_eval.model_cards`; read through `importlib.resources`, so a wheel, `pip install .` and an editable
install find them, and a source checkout on `sys.path` without an install finds the folder itself.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from plstitch_eval.errors import ConfigError

PACKAGE = "plstitch_eval"
MODEL_CARDS = "model_cards"


def package_path(*parts: str) -> Path:
    """The filesystem path of `parts` inside the installed `plstitch_eval` package.

    Why: shipped files must be found relative to the installed code, never to a repository checkout.
    `model_cards/...` resolves inside the shipped model_cards folder (`model_cards_dir`).
    """
    if parts and parts[0] == MODEL_CARDS:
        return model_cards_dir().joinpath(*parts[1:])
    location = resources.files(PACKAGE)
    for part in parts:
        location = location / part
    return Path(str(location))


def model_cards_dir() -> Path:
    """The shipped `model_cards/` folder (tiny model, `modelcard_template.md`, `paper_results.json`)."""
    try:
        return Path(str(resources.files(f"{PACKAGE}.{MODEL_CARDS}")))
    except ModuleNotFoundError:  # a source checkout used without installing: the repository's own folder
        return Path(__file__).resolve().parent.parent / MODEL_CARDS


def paper_results_path() -> Path:
    """`model_cards/paper_results.json`: the paper's reported numbers, BibTeX and reference-model list."""
    return model_cards_dir() / "paper_results.json"


def load_paper_results(path: str | Path | None = None) -> dict[str, Any]:
    """The paper's numbers (the shipped file, or `path`); one clear line if it cannot be read."""
    path = Path(path) if path is not None else paper_results_path()
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"Cannot read the paper results file {path}: {exc}") from exc
