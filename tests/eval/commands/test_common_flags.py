"""The common flags (--out, --dataset, --root, --split, --device) are spelled in commands/options.py alone:
commands take them as typed aliases, or from an alias factory where their help differs."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
import typer

from plstitch_eval.cli import app
from plstitch_eval.commands import analyze, data, frames, options, predict, publish, quickstart, reproduce
from plstitch_eval.knn_vote import KnnConfig
from plstitch_eval.linear_grid import LinearConfig

ADOPTED = (analyze, data, frames, predict, publish, quickstart, reproduce)
COMMON = ('"--out"', '"--dataset"', '"--root"', '"--split"', '"--device"')


@pytest.mark.parametrize("module", ADOPTED, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_the_commands_spell_no_common_flag(module) -> None:
    text = Path(module.__file__).read_text(encoding="utf-8")
    assert [flag for flag in COMMON if flag in text] == []


def test_the_factories_make_the_flags() -> None:
    cases = [
        (options.out_opt("x"), Path, ("--out", "-o")),
        (options.out_opt("x", kind=Path | None, short=False), Path | None, ("--out",)),
        (options.dataset_opt(), str, ("--dataset", "-d")),
        (options.root_opt(), Path | None, ("--root",)),
        (options.split_opt("x"), str | None, ("--split",)),
        (options.device_opt("auto", kind=str | None), str | None, ("--device",)),
    ]
    for alias, kind, flags in cases:
        declared, info = typing.get_args(alias)
        assert declared == kind and (info.default, *info.param_decls) == flags, flags  # Annotated: 1st = flag
    assert typing.get_args(options.device_opt("cpu"))[1].help == "auto, cpu or cuda[:N] (default cpu)."


def test_one_device_help_where_the_meanings_agree() -> None:
    """Every --device of these commands that accepts auto reads the same text as `DeviceOpt`."""
    same = typing.get_args(options.DeviceOpt)[1].help
    assert same == typing.get_args(options.device_opt())[1].help
    command = typer.main.get_command(app)
    names = ["extract", "predict", "benchmark", "quickstart"]
    subs = [command.commands[name] for name in names]
    subs += list(command.commands["analyze"].commands.values())
    seen = 0
    for sub in subs:
        for param in sub.params:
            if param.name == "device":
                assert param.help.removesuffix(".").split(" (default")[0] == same.removesuffix("."), sub.name
                seen += 1
    assert seen >= 8


def test_choices_help_marks_the_default() -> None:
    knn_like = {"exp": "DINO", "similarity": "", "uniform": ""}
    assert options.choices_help(knn_like, "exp") == "exp (DINO, default), similarity or uniform"
    assert options.choices_help(knn_like, "uniform") == "exp (DINO), similarity or uniform (default)"
    assert options.choices_help({"only": ""}, "only") == "only (default)"


def test_the_choice_marked_default_in_help_is_the_configs() -> None:
    """`NAME (..., default)` in a protocol option's help is the config dataclass's default."""
    command = typer.main.get_command(app)
    expected = {
        ("knn", "weighting"): KnnConfig().weighting,
        ("linear", "optimizer"): LinearConfig().optimizer,
        ("linear", "select_metric"): LinearConfig().select_metric,
    }
    for (name, option), default in expected.items():
        (param,) = [p for p in command.commands[name].params if p.name == option]
        marked = re.findall(r"([\w]+) \((?:[^()]*, )?default\)", param.help)
        assert marked == [default], (name, option, param.help)
