"""Results in an export must be measured on its weights: checked at export and again at push-to-hub."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from huggingface_hub import HfApi
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import PublishError
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.hub.timm_format import save_timm_dir
from plstitch_eval.preprocess import DataConfig
from plstitch_train.publishing.export import export_model
from plstitch_train.publishing.publish import push_to_hub
from tests.eval.extract.conftest import make_cholec80
from tests.train.test_export import make_results, make_run_dir, tiny_vit

runner = CliRunner()


def _evaluate(model: Path, root: Path, work: Path) -> Path:
    """`plstitch extract --model MODEL` then `plstitch knn --json`, as a user measures a model."""
    store, results = work / "store", work / "knn.json"
    args = ["extract", "--dataset", "cholec80", "--root", str(root), "--model", str(model),
            "--out", str(store), "--fps", "1", "--num-workers", "0", "--device", "cpu"]  # fmt: skip
    extracted = runner.invoke(app, args)
    assert extracted.exit_code == 0, extracted.output
    scored = runner.invoke(app, ["knn", "--features", str(store), "--json", str(results)])
    assert scored.exit_code == 0, scored.output
    return results


@pytest.fixture(scope="module")
def setting(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run, its export (no results yet), a two-video Cholec80 layout (one train, one test video), and a
    results file measured on another model."""
    root = tmp_path_factory.mktemp("results")
    run, _, _ = make_run_dir(root)
    out = export_model(run, root / "exported")
    data = make_cholec80(make_cholec80(root / "c80", (2,), start=1), (2,), start=41)
    other = save_timm_dir(tiny_vit(), root / "other-model", DataConfig.for_size(32))  # fresh random weights
    return {
        "root": root,
        "run": run,
        "out": out,
        "data": data,
        "own": _evaluate(out, data, root / "own"),
        "other": _evaluate(other, data, root / "other"),
    }


def test_export_extract_knn_export_round_trip_is_accepted(setting, tmp_path) -> None:
    own = json.loads(setting["own"].read_text())
    assert own["model"]["provenance"]["sha256"] == sha256_file(setting["out"] / "model.safetensors")
    out = tmp_path / "with-results"
    args = ["export", str(setting["run"]), "--out", str(out), "--results", str(setting["own"])]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    meta = json.loads((out / "plstitch.json").read_text())
    assert meta["weights_sha256"] == sha256_file(out / "model.safetensors")
    recorded = meta["results"][0]
    assert recorded["metrics"]["accuracy"] == own["metrics"]["accuracy"]
    assert recorded["model"]["weights_sha256"] == meta["weights_sha256"]
    assert recorded["model"]["matched"] == "model.safetensors"
    assert "knn_accuracy" in (out / "README.md").read_text()
    assert meta["weights_sha256"] in (out / "README.md").read_text()  # the card names its weights


def test_results_of_another_model_are_refused_naming_both_weights(setting, tmp_path) -> None:
    other = json.loads(setting["other"].read_text())
    out = tmp_path / "wrong"
    args = ["export", str(setting["run"]), "--out", str(out), "--results", str(setting["other"])]
    result = runner.invoke(app, args)
    assert result.exit_code == 1
    message = result.stderr.strip()
    assert "\n" not in message and "Traceback" not in result.output
    theirs = other["model"]["provenance"]["sha256"][:16]
    ours = sha256_file(setting["out"] / "model.safetensors")[:16]
    assert theirs != ours
    assert str(setting["other"]) in message and other["model"]["spec"] in message
    assert theirs in message and ours in message
    assert "plstitch extract --model" in message
    assert not out.exists() and not list(tmp_path.glob(".wrong*"))  # nothing written


def test_results_without_a_weights_digest_are_refused(setting, tmp_path) -> None:
    unverifiable = make_results(tmp_path / "typed.json")  # no provenance sha256
    with pytest.raises(PublishError, match=r"typed\.json records no weights sha256"):
        export_model(setting["run"], tmp_path / "out", [unverifiable])


def test_results_measured_on_the_source_weights_are_accepted(setting, tmp_path) -> None:
    """`extract --model RUN` (backbone/) or `--model last.ckpt` (its teacher) measure the exported weights."""
    run = setting["run"]
    from_run = make_results(tmp_path / "run.json", weights=run / "backbone" / "model.safetensors")
    out = export_model(run, tmp_path / "a", [from_run])
    assert json.loads((out / "plstitch.json").read_text())["results"][0]["model"]["weights_sha256"]
    from_ckpt = make_results(tmp_path / "ckpt.json", weights=run / "last.ckpt")
    out = export_model(run / "last.ckpt", tmp_path / "b", [from_ckpt])
    matched = json.loads((out / "plstitch.json").read_text())["results"][0]["model"]["matched"]
    assert matched.endswith("last.ckpt")
    student = json.loads(from_ckpt.read_text())
    student["model"]["provenance"]["which"] = "student"
    (tmp_path / "student.json").write_text(json.dumps(student))
    with pytest.raises(PublishError, match="student network"):
        export_model(run / "last.ckpt", tmp_path / "c", [tmp_path / "student.json"])


# --- push-to-hub: the folder's results must still belong to its model.safetensors -------------------------


@pytest.fixture
def published(setting, tmp_path, monkeypatch) -> tuple[Path, list[str]]:
    """An export with results, and a record of the Hub calls (network edge patched)."""
    out = export_model(setting["run"], tmp_path / "pub", [setting["own"]])
    calls: list[str] = []
    monkeypatch.setattr(HfApi, "create_repo", lambda self, **kw: calls.append("create_repo"))
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, **kw: calls.append("upload_folder") or "url")
    return out, calls


def test_push_accepts_an_intact_export(published) -> None:
    out, calls = published
    push_to_hub(out, "me/tiny", token="hf_x")
    assert calls == ["create_repo", "upload_folder"]


def test_push_refuses_weights_swapped_after_export(published, setting) -> None:
    out, calls = published
    other = setting["root"] / "other-model" / "model.safetensors"
    shutil.copyfile(other, out / "model.safetensors")  # same architecture: loads fine, other numbers
    result = runner.invoke(app, ["push-to-hub", str(out), "--repo-id", "me/tiny", "--dry-run"])
    assert result.exit_code == 1 and calls == []
    message = result.stderr.strip()
    assert "\n" not in message and "plstitch.json" in message
    assert sha256_file(other)[:16] in message and "plstitch export" in message


def test_push_refuses_card_numbers_that_plstitch_json_does_not_record(published) -> None:
    out, calls = published
    readme = out / "README.md"
    text = readme.read_text()
    value = json.loads((out / "plstitch.json").read_text())["results"][0]["metrics"]["accuracy"]
    shown = f"value: {round(value, 4)}"
    assert shown in text
    readme.write_text(text.replace(shown, "value: 64.2", 1))
    with pytest.raises(PublishError, match=r"README\.md lists 1 evaluation result.*64\.2"):
        push_to_hub(out, "me/tiny", token="hf_x", dry_run=True)
    assert calls == []


def test_push_refuses_results_recorded_for_other_weights(published) -> None:
    out, calls = published
    meta = json.loads((out / "plstitch.json").read_text())
    meta["results"][0]["model"]["weights_sha256"] = "f" * 64  # copied from another export
    (out / "plstitch.json").write_text(json.dumps(meta))
    with pytest.raises(PublishError, match=r"knn\.json.*ffffffffffffffff.*not on this folder's model"):
        push_to_hub(out, "me/tiny", token="hf_x")
    del meta["weights_sha256"]  # an export from before results were checked
    (out / "plstitch.json").write_text(json.dumps(meta))
    with pytest.raises(PublishError, match="no recorded weights"):
        push_to_hub(out, "me/tiny", token="hf_x")
    assert calls == []


def test_push_refuses_a_card_whose_metadata_does_not_parse_in_one_line(published) -> None:
    out, calls = published
    text = (out / "README.md").read_text()
    (out / "README.md").write_text(text.replace("model-index:", "model-index: [unclosed\n  x:", 1))
    result = runner.invoke(app, ["push-to-hub", str(out), "--repo-id", "me/tiny", "--dry-run"])
    assert result.exit_code == 1 and calls == []
    message = result.stderr.strip()
    assert "\n" not in message and "README.md: its metadata does not parse" in message
    assert "Traceback" not in result.output
