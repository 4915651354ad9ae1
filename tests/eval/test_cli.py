from typer.testing import CliRunner

from plstitch_eval import __version__
from plstitch_eval.cli import app
from plstitch_eval.errors import DataError

runner = CliRunner()


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.stdout


def test_help_lists_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "Usage" in result.stdout


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
