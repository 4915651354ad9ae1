import json

import torch
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.hub.registry import list_models

runner = CliRunner()


def test_models_table_lists_every_entry(hf_cache):
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    for entry in list_models():
        assert entry.name in result.stdout
    assert "visurg/PL-Stitch/pl_lemon.pth" in result.stdout and "1536" in result.stdout


def test_models_json_reports_cached_state(hf_cache):
    hf_cache("visurg/PL-Stitch", {"pl_gtea.pth": lambda p: torch.save({"w": torch.ones(1)}, p)})
    result = runner.invoke(app, ["models", "--json", "-"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["pl-stitch-gtea"]["cached"] is True and rows["pl-stitch-lemon"]["cached"] is False
    assert rows["lemonfm"]["feature_dim"] == 1536 and rows["dino-vitb16"]["license"] == "Apache-2.0"


def test_download_offline_fails_clearly(hf_cache):
    result = runner.invoke(app, ["download", "pl-stitch-lemon", "--revision", "main"])
    assert result.exit_code == 1
    assert "visurg/PL-Stitch" in result.output and "pl_lemon.pth" in result.output
    assert "Traceback" not in result.output


def test_download_cached_reports_commit(hf_cache, tmp_path):
    _, commit = hf_cache("visurg/LemonFM", {"LemonFM.pth": lambda p: torch.save({"w": torch.ones(1)}, p)})
    result = runner.invoke(app, ["download", "lemonfm", "--cache-dir", str(hf_cache.cache_dir)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.strip().splitlines()[-1])["commit"] == commit


def test_download_unknown_and_local_only_models(hf_cache):
    assert runner.invoke(app, ["download", "no-such-model"]).exit_code == 1
    result = runner.invoke(app, ["download", "ibot-vitb16"])
    assert result.exit_code == 1 and "not on the Hugging Face Hub" in result.output


def test_models_json_file_keeps_the_table(hf_cache, tmp_path):
    out = tmp_path / "models.json"
    result = runner.invoke(app, ["models", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert [row["name"] for row in json.loads(out.read_text())] == [e.name for e in list_models()]
    assert "plstitch encoders" in result.stdout  # the table is still the stdout result
