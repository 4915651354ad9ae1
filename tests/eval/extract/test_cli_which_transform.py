"""`plstitch extract --transform` / `--which`: the store records what the model was fed, and which network."""

from __future__ import annotations

import json

import torch
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.store.features import FeatureStore
from tests.eval.hub.conftest import make_tiny_vit
from tests.eval.hub.test_convert import training_checkpoint

runner = CliRunner()


def _args(root, model, out, *extra):
    return ["extract", "--dataset", "cholec80", "--root", str(root), "--model", str(model), "--out", str(out),
            "--videos", "video01", "--fps", "1", "--num-workers", "0", "--device", "cpu", *extra]  # fmt: skip


def test_transform_override_is_recorded_and_changes_the_features(cholec_root, tiny_model_dir, tmp_path):
    res = runner.invoke(app, _args(cholec_root, tiny_model_dir, tmp_path / "crop"))
    assert res.exit_code == 0, res.output
    res = runner.invoke(
        app, _args(cholec_root, tiny_model_dir, tmp_path / "whole", "--transform", "whole-frame")
    )
    assert res.exit_code == 0, res.output
    crop, whole = FeatureStore(tmp_path / "crop"), FeatureStore(tmp_path / "whole")
    assert crop.manifest["preprocessing"]["crop_mode"] == "center"
    assert whole.manifest["preprocessing"]["crop_mode"] == "squash"
    assert whole.manifest["model"]["provenance"]["transform"] == "whole-frame"
    assert not torch.allclose(
        torch.from_numpy(crop.read("video01").features), torch.from_numpy(whole.read("video01").features)
    )
    bad = runner.invoke(app, _args(cholec_root, tiny_model_dir, tmp_path / "x", "--transform", "stretch"))
    assert bad.exit_code != 0 and "--transform 'stretch'" in bad.output and "Traceback" not in bad.output


def test_which_student_reaches_the_store(cholec_root, tmp_path):
    path = tmp_path / "ckpt.pth"
    torch.save(training_checkpoint(make_tiny_vit().state_dict()), path)
    res = runner.invoke(app, _args(cholec_root, path, tmp_path / "s", "--which", "student"))
    assert res.exit_code == 0, res.output
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert manifest["model"]["provenance"]["which"] == "student"
    res = runner.invoke(app, _args(cholec_root, path, tmp_path / "t"))
    teacher, student = (
        FeatureStore(tmp_path / "t").read("video01"),
        FeatureStore(tmp_path / "s").read("video01"),
    )
    assert not torch.allclose(torch.from_numpy(teacher.features), torch.from_numpy(student.features))
