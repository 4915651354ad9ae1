import click
import pytest
import typer
from typer.testing import CliRunner

from plstitch_eval import __version__
from plstitch_eval.cli import app
from plstitch_eval.errors import DataError
from plstitch_eval.hub.registry import close_model_names, did_you_mean

runner = CliRunner()


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.stdout


COMMANDS = (
    "quickstart", "models", "download", "datasets", "extract", "export-mstcn", "protocols", "knn", "linear",
    "cv", "score", "table", "temporal", "predict", "benchmark", "analyze", "train", "write-lmdb", "reproduce",
    "export", "push-to-hub", "objectives", "export-onnx", "probes", "tasks", "report",
)  # fmt: skip


def _listed_commands(help_text: str) -> set[str]:
    """Command names in the first column of a help page's command panel."""
    words = (line.strip("│ ").split(" ", 1)[0] for line in help_text.splitlines())
    return {word for word in words if word}


def test_help_lists_commands():
    result = runner.invoke(app, ["--help"], terminal_width=120)
    assert result.exit_code == 0
    assert "Usage" in result.stdout
    assert set(COMMANDS) <= _listed_commands(result.stdout)
    registered = {path[0] for path in _all_command_paths(typer.main.get_command(app))}
    assert registered == set(COMMANDS)  # a new command is added to this list (and the docs) on purpose


def test_plstitch_error_becomes_one_line(monkeypatch):
    @app.command("_boom", hidden=True)
    def _boom() -> None:
        raise DataError("labels.txt line 3: unknown phase 'Foo'")

    try:
        result = runner.invoke(app, ["_boom"])
        assert result.exit_code == 1
        assert "unknown phase 'Foo'" in result.output
        assert "Traceback" not in result.output
        debug = runner.invoke(app, ["--debug", "_boom"])
        assert isinstance(debug.exception, DataError)
    finally:
        app.registered_commands = [c for c in app.registered_commands if c.name != "_boom"]


# ------------------------------------------------------------------------------ messages are never markup
def _stderr_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize(
    "message",
    [
        "runs/[exp1]/feats is not a feature store",
        "runs/[/old]/feats is not a feature store",
        "use hf-hub:ORG/NAME[/FILE] or a [bold]path[/bold]",
    ],
)
def test_error_message_prints_verbatim_on_one_line(message: str) -> None:
    @app.command("_bracket", hidden=True)
    def _bracket() -> None:
        raise DataError(message)

    try:
        result = runner.invoke(app, ["_bracket"])
    finally:
        app.registered_commands = [c for c in app.registered_commands if c.name != "_bracket"]
    assert result.exit_code == 1
    assert _stderr_lines(result) == [f"error: {message}"]
    assert "Traceback" not in result.output


def test_download_unknown_model_is_one_line() -> None:
    result = runner.invoke(app, ["download", "nosuchmodel"])
    assert result.exit_code == 1
    lines = _stderr_lines(result)
    assert len(lines) == 1 and "'nosuchmodel'" in lines[0] and "hf-hub:ORG/NAME[/FILE]" in lines[0]
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("typo", "meant"), [("pl-stich-lemon", "pl-stitch-lemon"), ("dino-vit-b16", "dino-vitb16")]
)
def test_mistyped_model_suggests_the_closest_names(typo: str, meant: str, tmp_path) -> None:
    args = ["extract", "--dataset", "synthetic", "--model", typo, "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    lines = _stderr_lines(result)
    assert len(lines) == 1 and "Traceback" not in result.output
    assert f"Did you mean '{meant}'" in lines[0] and "hf-hub:ORG/NAME[/FILE]" in lines[0]
    download = runner.invoke(app, ["download", typo])
    assert download.exit_code == 1 and f"Did you mean '{meant}'" in download.stderr


def test_close_model_names_come_from_the_registry() -> None:
    assert close_model_names("pl-stitch-lemn")[0] == "pl-stitch-lemon"
    assert close_model_names("completely-different-name") == []
    assert did_you_mean("zzzz") == ""


def _all_command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = []
    for name, command in group.commands.items():
        paths.append((*prefix, name))
        if isinstance(command, click.Group):
            paths += _all_command_paths(command, (*prefix, name))
    return paths


def test_every_help_page_renders() -> None:
    """Help texts are rich markup: a stray `[/X]` in one would crash `--help` (as `download --help` did)."""
    group = typer.main.get_command(app)
    paths = _all_command_paths(group)
    assert ("download",) in paths and ("reproduce",) in paths
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], terminal_width=100)
        assert result.exit_code == 0, (path, result.output[-2000:])
    download = runner.invoke(app, ["download", "--help"], terminal_width=200)
    assert "hf-hub:ORG/NAME[/FILE]" in download.stdout


def test_reproduce_help_lists_every_preset_in_full() -> None:
    from plstitch_train.reproduce import REPRODUCE_PRESETS

    result = runner.invoke(app, ["reproduce", "--help"], env={"COLUMNS": "60"}, terminal_width=60)
    assert result.exit_code == 0, result.output
    assert len(REPRODUCE_PRESETS) >= 2
    text = " ".join(result.stdout.split())  # undo the wrapping of a narrow terminal
    for name, preset in REPRODUCE_PRESETS.items():
        assert (
            f"{name}: " in text and f"{preset.seeds} seed{'s' if preset.seeds != 1 else ''} per row" in text
        )
        if preset.steps:
            assert f"; {preset.steps} steps per run, {preset.seeds} seeds per row" in text
        assert f"{name}: rows {', '.join(preset.rows)}" in text
