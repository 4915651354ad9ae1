"""extract, predict and benchmark share one encode-options group: the same flags give the same settings, and
their help states the dataclass's defaults."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.commands.options import default_of, encode_settings
from plstitch_eval.encode_options import EncodeOptions
from plstitch_eval.extract import ExtractOptions
from plstitch_eval.predict import PredictOptions

ENCODE_FLAGS = [
    "--batch-size", "5", "--num-workers", "0", "--device", "cpu", "--precision", "fp32",
    "--decoder", "pyav", "--decode-device", "cpu",
]  # fmt: skip
ENCODED = EncodeOptions(
    batch_size=5, num_workers=0, device="cpu", precision="fp32", decoder="pyav", decode_device="cpu"
)


class _Stop(Exception):
    """Raised by the spy once a command has made its options, so nothing runs after."""


def _options_made_by(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> EncodeOptions:
    """The options object (ExtractOptions or PredictOptions) a command builds from `args`."""
    made: list[EncodeOptions] = []

    def spy(self: EncodeOptions) -> None:
        made.append(self)
        raise _Stop

    with monkeypatch.context() as patch:
        patch.setattr(EncodeOptions, "__post_init__", spy)
        result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, _Stop), result.output
    (options,) = made
    return options


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    """Each encoding command with its required arguments, ready for the encode flags."""
    out = str(tmp_path / "out")
    return {
        "extract": ["extract", "--dataset", "synthetic", "--out", out],
        "predict": ["predict", "--probe", str(tmp_path / "probe"), "--out", out, "video.mp4"],
        "benchmark": ["benchmark", "--models", "raw-pixels", "--datasets", "synthetic", "--out", out],
    }


def test_the_same_flags_give_the_same_encoding_in_every_command(monkeypatch, tmp_path) -> None:
    made = {
        name: _options_made_by(monkeypatch, [*args, *ENCODE_FLAGS])
        for name, args in _commands(tmp_path).items()
    }
    assert isinstance(made["extract"], ExtractOptions) and isinstance(made["benchmark"], ExtractOptions)
    assert isinstance(made["predict"], PredictOptions)
    for name, options in made.items():
        assert options.encoding() == ENCODED, name


def test_no_flags_give_the_dataclass_defaults(monkeypatch, tmp_path) -> None:
    made = {name: _options_made_by(monkeypatch, args) for name, args in _commands(tmp_path).items()}
    assert made["extract"] == ExtractOptions() and made["benchmark"] == ExtractOptions()
    assert made["predict"] == PredictOptions()
    assert made["predict"].encoding() == replace(EncodeOptions(), decoder=None)  # None: the probe's decoder


def test_encode_settings_keeps_only_the_flags_given() -> None:
    assert encode_settings() == {}
    assert encode_settings(batch_size=8, decoder=None, num_workers=0) == {"batch_size": 8, "num_workers": 0}
    assert PredictOptions(**encode_settings(precision="bf16")) == PredictOptions(precision="bf16")


def test_every_encoding_default_in_help_is_the_dataclass_default() -> None:
    """`(default X)` in the help of an encode flag of any command that encodes frames (it takes
    --decode-device) is the default of the encode options."""
    command = typer.main.get_command(app)
    encode_fields = {f for f in EncodeOptions.__dataclass_fields__}
    checked = set()
    for name, sub in command.commands.items():
        params = getattr(sub, "params", [])
        if not any(p.name == "decode_device" for p in params):
            continue
        for param in params:
            found = re.search(r"\(default ([-\w.]+)\)", getattr(param, "help", None) or "")
            if param.name in encode_fields and found:
                assert found.group(1) == str(getattr(EncodeOptions(), param.name)), (name, param.help)
                checked.add((name, param.name))
    expected = {
        (name, flag) for name in ("extract", "predict", "benchmark") for flag in ("batch_size", "device")
    }
    assert expected <= checked


@pytest.mark.parametrize("name", ["extract", "predict", "benchmark"])
def test_help_states_the_options_defaults(name: str) -> None:
    config = PredictOptions() if name == "predict" else ExtractOptions()
    params = {p.name: p for p in typer.main.get_command(app).commands[name].params}
    assert f"(default {config.batch_size})" in params["batch_size"].help
    assert f"(default {config.device})" in params["device"].help
    assert params["precision"].help.startswith(f"{config.precision} (default: ")
    assert all(params[f].default is None for f in ("batch_size", "device", "precision", "num_workers"))


def test_default_of_reads_a_dataclass_field() -> None:
    @dataclass
    class Toy:
        path: str
        size: int = 3
        names: list[str] = field(default_factory=lambda: ["a"])

    assert default_of(Toy, "size") == 3
    assert default_of(Toy, "names") == ["a"]
    assert default_of(ExtractOptions, "batch_size") == ExtractOptions().batch_size
    for missing in ("colour", "path"):
        with pytest.raises(KeyError, match=f"no field '{missing}' with a default"):
            default_of(Toy, missing)
