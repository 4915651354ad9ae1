"""Shared CLI options are declared once, and a setting left unset takes the config dataclass's default."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import typer

from plstitch_eval.cli import app
from plstitch_eval.commands import evaluate, options, temporal
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig
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
    shared = ('"--relaxed"', '"--val-fraction"', 'help="auto, cpu or cuda', '"--trust-pickle"', '"--which"')
    shared += ('"--transform"', '"--temperature"', '"--weighting"', '"--resize-on-decode"')
    for flag in shared:
        homes = [p.name for p in COMMANDS.glob("*.py") if flag in p.read_text(encoding="utf-8")]
        assert homes == [Path(options.__file__).name], (flag, homes)
    for module in (evaluate, temporal):  # the probe commands take --features/--save/--overwrite from options
        text = Path(module.__file__).read_text(encoding="utf-8")
        for flag in ('"--features"', '"--save"', '"--overwrite"', '"--split-scheme"', '"--json"'):
            assert flag not in text, (module.__name__, flag)


def test_given_drops_only_none() -> None:
    assert options.given(a=None, b=0, c=False, d="") == {"b": 0, "c": False, "d": ""}


def test_benchmark_unset_options_give_the_dataclass_defaults(monkeypatch, tmp_path) -> None:
    """`plstitch benchmark` with no protocol or encoding option: every config is its dataclass's default."""
    from typer.testing import CliRunner

    from plstitch_eval.benchmark import runner
    from plstitch_eval.extract import ExtractOptions

    seen = {}

    def stop(config):
        seen["config"] = config
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_benchmark", stop)
    args = ["benchmark", "--models", "raw-pixels", "--datasets", "synthetic", "--out", str(tmp_path / "b")]
    result = CliRunner().invoke(app, [*args, "--device", "cpu"])
    assert result.exit_code == 130, result.output
    config = seen["config"]
    assert config.extract == ExtractOptions(device="cpu")
    assert config.knn == KnnConfig(device="cpu")
    assert config.linear == LinearConfig(device="cpu")
    assert config.temporal == TemporalConfig(device="cpu")
    assert config.cv_seed == 0
    result = CliRunner().invoke(app, [*args, "--k", "7", "--seed", "3", "--batch-size", "5"])
    config = seen["config"]
    assert (config.knn.k, config.linear.seed, config.temporal.seed, config.cv_seed) == (7, 3, 3, 3)
    assert config.extract.batch_size == 5 and config.extract.device == "auto"


def test_encoding_defaults_named_in_help_are_the_options() -> None:
    """extract, benchmark and predict state the batch size's default: it must be the dataclass's."""
    from plstitch_eval.extract import ExtractOptions
    from plstitch_eval.predict import PredictOptions

    command = typer.main.get_command(app)
    for name, config in (
        ("extract", ExtractOptions),
        ("benchmark", ExtractOptions),
        ("predict", PredictOptions),
    ):
        (param,) = [p for p in command.commands[name].params if p.name == "batch_size"]
        found = re.search(r"\(default (\d+)\)", param.help)
        assert found and int(found.group(1)) == config.batch_size, (name, param.help)
        assert param.default is None, name
