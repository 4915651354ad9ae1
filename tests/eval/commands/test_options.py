"""Shared CLI options are declared once, and a setting left unset takes the config dataclass's default."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import typer

from plstitch_eval.cli import app
from plstitch_eval.commands import evaluate, options, temporal
from plstitch_eval.knn import KnnConfig
from plstitch_eval.linear import LinearConfig
from plstitch_eval.temporal.fit import TemporalConfig

COMMANDS = Path(evaluate.__file__).parent


def test_unset_options_give_the_dataclass_defaults() -> None:
    knn = evaluate._knn_config(None, None, None, "cpu", None, None)
    assert knn == KnnConfig(device="cpu")
    linear = evaluate._linear_config(None, None, None, None, None, None, None, None, None, "cpu")
    assert linear == LinearConfig(device="cpu")
    assert temporal.temporal_config(epochs=None, lr=None) == TemporalConfig()
    assert evaluate._knn_config(5, None, "uniform", "cpu", None, 2) == KnnConfig(
        k=5, weighting="uniform", device="cpu", num_threads=2
    )


def test_defaults_named_in_help_are_the_configs() -> None:
    """`(default X)` in an option's help must be the dataclass default it stands for."""
    configs = {"knn": KnnConfig, "linear": LinearConfig, "cv": KnnConfig, "temporal": TemporalConfig}
    renamed = {"balance": "balance_classes", "threads": "num_threads"}
    command = typer.main.get_command(app)
    checked = 0
    for name, config in configs.items():
        defaults = {f.name: f.default for f in fields(config)}
        for param in command.commands[name].params:
            found = re.search(r"\(default (?:[a-z ]+ )?([-\w.]+)\)", getattr(param, "help", None) or "")
            field = renamed.get(param.name, param.name)
            if not found or field not in defaults:
                continue
            value = defaults[field]
            shown = (
                {True: "on", False: "off"}.get(value, str(value)) if isinstance(value, bool) else str(value)
            )
            assert found.group(1) == shown, (
                f"{name} --{param.name}: help says {found.group(1)}, config {shown}"
            )
            checked += 1
    assert checked >= 8


def test_shared_flags_are_declared_only_in_options() -> None:
    for flag in ('"--relaxed"', '"--val-fraction"', 'help="auto, cpu or cuda'):
        homes = [p.name for p in COMMANDS.glob("*.py") if flag in p.read_text(encoding="utf-8")]
        assert homes == [Path(options.__file__).name], (flag, homes)
    for module in (evaluate, temporal):  # the probe commands take --features/--save/--overwrite from options
        text = Path(module.__file__).read_text(encoding="utf-8")
        for flag in ('"--features"', '"--save"', '"--overwrite"', '"--split-scheme"', '"--json"'):
            assert flag not in text, (module.__name__, flag)


def test_given_drops_only_none() -> None:
    assert options.given(a=None, b=0, c=False, d="") == {"b": 0, "c": False, "d": ""}
