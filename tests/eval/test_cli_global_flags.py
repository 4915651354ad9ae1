"""App-wide flags (`-q`/`--quiet`, `--debug`) work after the command name too, and `-j` means one thing."""

import logging

import click
import typer
from typer.testing import CliRunner

from plstitch_eval.cli import app, hoist_global_flags
from plstitch_eval.errors import DataError
from plstitch_eval.utils.console import is_quiet, logger

runner = CliRunner()


def test_hoisting_moves_only_global_flags_and_keeps_the_rest_in_order() -> None:
    args = ["knn", "--features", "f", "-q", "--k", "5", "--debug", "--", "-q"]
    assert hoist_global_flags(args) == ["-q", "--debug", "knn", "--features", "f", "--k", "5", "--", "-q"]
    assert hoist_global_flags(["knn", "--k", "5"]) == ["knn", "--k", "5"]


def test_debug_after_the_command_name_shows_the_exception() -> None:
    @app.command("_boom2", hidden=True)
    def _boom2() -> None:
        raise DataError("labels.txt line 3: unknown phase 'Foo'")

    try:
        plain = runner.invoke(app, ["_boom2"])
        assert plain.exit_code == 1 and plain.exception is not None
        assert not isinstance(plain.exception, DataError)  # one line, typer.Exit
        after = runner.invoke(app, ["_boom2", "--debug"])
        assert isinstance(after.exception, DataError)
    finally:
        app.registered_commands = [c for c in app.registered_commands if c.name != "_boom2"]


def test_quiet_after_the_command_name_silences_info_logs() -> None:
    seen: list[tuple[bool, int]] = []

    @app.command("_talk", hidden=True)
    def _talk() -> None:
        seen.append((is_quiet(), logger.getEffectiveLevel()))

    try:
        for args in (["_talk"], ["_talk", "-q"], ["_talk", "--quiet"], ["-q", "_talk"]):
            assert runner.invoke(app, args).exit_code == 0
        assert seen == [(False, logging.INFO)] + [(True, logging.WARNING)] * 3
    finally:
        app.registered_commands = [c for c in app.registered_commands if c.name != "_talk"]


def test_short_j_means_decoding_workers_wherever_it_exists() -> None:
    command = typer.main.get_command(app)
    assert isinstance(command, click.Group | typer.core.TyperGroup)
    meaning = {}
    for name, sub in command.commands.items():
        for param in sub.params:
            if "-j" in getattr(param, "opts", []):
                meaning[name] = param.name
    assert meaning, "no command has -j"
    assert set(meaning.values()) == {"num_workers"}, meaning
