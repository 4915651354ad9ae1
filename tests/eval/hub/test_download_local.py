"""Issue 44: `plstitch download` of a model that is already usable without a download (the shipped tiny
models, a checkpoint its environment variable names, a built-in encoder) says so and exits 0; a named path
that is missing is one line naming it and the fix (for a plugin's encoder, its own package, issue 55)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.download import local_weights
from plstitch_eval.hub.model_entry import ModelEntry
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.registry import SHIPPED_PACKAGE

runner = CliRunner()


@pytest.mark.parametrize("name", ["plstitch-tiny-synthetic", "ibot-tiny-synthetic"])
def test_a_shipped_model_is_already_there_and_exits_0(hf_cache, name):
    shipped = MODELS[name].resolve_local_path()
    assert shipped is not None and shipped.exists()
    result = runner.invoke(app, ["download", name])
    assert result.exit_code == 0, result.output
    assert "error" not in result.output
    assert f"{name} is already usable" in result.stderr and "nothing to download" in result.stderr
    assert json.loads(result.stdout) == {"name": name, "files": [str(shipped)], "commit": None}
    assert not any(Path(hf_cache.cache_dir).iterdir())  # nothing fetched into the cache


def test_a_checkpoint_named_by_its_variable_is_already_there(hf_cache, tmp_path, monkeypatch):
    checkpoint = tmp_path / "ibot_vitb16.pth"
    checkpoint.write_bytes(b"weights")
    monkeypatch.setenv("PLSTITCH_IBOT_CHECKPOINT", str(checkpoint))
    result = runner.invoke(app, ["download", "ibot-vitb16"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["files"] == [str(checkpoint)]


def test_a_missing_checkpoint_is_one_line_naming_it_and_the_variable(hf_cache, tmp_path, monkeypatch):
    missing = tmp_path / "nowhere.pth"
    monkeypatch.setenv("PLSTITCH_IBOT_CHECKPOINT", str(missing))
    result = runner.invoke(app, ["download", "ibot-vitb16"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "$PLSTITCH_IBOT_CHECKPOINT" in lines[0]
    monkeypatch.delenv("PLSTITCH_IBOT_CHECKPOINT")
    unset = runner.invoke(app, ["download", "ibot-vitb16"])
    assert unset.exit_code == 1 and "Set $PLSTITCH_IBOT_CHECKPOINT to its checkpoint file" in unset.output


def test_a_built_in_encoder_needs_no_download(hf_cache):
    built_in = next(name for name, entry in MODELS.items() if not entry.has_weights)
    assert local_weights(built_in) == []
    result = runner.invoke(app, ["download", built_in])
    assert result.exit_code == 0, result.output
    assert "built in" in result.stderr and json.loads(result.stdout)["files"] == []


def test_hub_models_and_other_specs_still_download():
    assert local_weights("pl-stitch-lemon") is None
    assert local_weights("hf-hub:org/name") is None and local_weights("no-such-model") is None


def test_a_hub_model_whose_variable_names_a_missing_file_is_fetched_from_the_hub(tmp_path, monkeypatch):
    name, entry = next((n, e) for n, e in MODELS.items() if e.repo_id and e.path_env)
    monkeypatch.setenv(entry.path_env, str(tmp_path / "absent.pth"))
    assert local_weights(name) is None  # the Hub has it: `download` fetches it as before
    (tmp_path / "absent.pth").write_bytes(b"weights")
    assert local_weights(name) == [tmp_path / "absent.pth"]


@pytest.mark.parametrize(
    ("package", "fix"),
    [
        (
            "plstitch-fake-encoders",
            "the encoder comes from package 'plstitch-fake-encoders': make or install",
        ),
        (SHIPPED_PACKAGE, "reinstall plstitch (the folder ships with the package)"),
    ],
)
def test_missing_local_weights_name_the_package_the_encoder_comes_from(hf_cache, monkeypatch, package, fix):
    """A plugin's encoder whose weights folder is missing: its own package is the fix, never plstitch."""
    entry = ModelEntry(
        "toy-missing-weights",
        "vit_toy",
        32,
        "timm",
        local_path="weights/toy-missing",
        path_env="PLSTITCH_TOY_X",
    )
    monkeypatch.delenv("PLSTITCH_TOY_X", raising=False)
    MODELS.register(entry.name, entry, package=package)
    try:
        with pytest.raises(ConfigError) as caught:
            local_weights(entry.name)
        result = runner.invoke(app, ["download", entry.name])
    finally:
        MODELS.unregister(entry.name)
    message = str(caught.value)
    assert "weights/toy-missing" in message and fix in message and "\n" not in message
    assert ("reinstall plstitch " in message) == (package == SHIPPED_PACKAGE)
    assert ("$PLSTITCH_TOY_X" in message) == (package != SHIPPED_PACKAGE)
    assert result.exit_code == 1 and fix in result.stderr and len(result.stderr.strip().splitlines()) == 1
