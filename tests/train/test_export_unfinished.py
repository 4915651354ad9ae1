"""Exporting an unfinished run (stopped early: `last.ckpt`, no `backbone/`): all its heads, marked as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import PublishError
from plstitch_train.publishing.export import export_model
from plstitch_train.trainer import train
from tests.train.conftest import tiny_config

# 56 training frames (24 + 32 at 4 fps) in batches of 28: 2 steps per epoch, 4 in the 2 planned epochs
STEPS_PER_EPOCH, TOTAL_STEPS = 2, 4


def _one_line(text: str) -> str:
    """Rich wraps log lines to the console width: compare with the whitespace collapsed."""
    return " ".join(text.split())


def _checkpoint_part(run: Path, prefix: str) -> dict[str, torch.Tensor]:
    state = torch.load(run / "last.ckpt", map_location="cpu", weights_only=True)["model"]
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}


@pytest.fixture(scope="module")
def stopped_runs(video_dir, frame_cache, tmp_path_factory) -> dict[str, Path]:
    """One run stopped in epoch 1 (total unknown to its checkpoint), exported through the CLI both ways;
    then resumed and stopped in epoch 2, exported again; then resumed to its end (`backbone/` written)."""
    root = tmp_path_factory.mktemp("unfinished")
    run = root / "run"
    config = tiny_config(video_dir, frame_cache, batch_size=28, epochs=2)
    outputs: dict[str, object] = {"run": run}
    train(config, run, stop_after=1)  # as after a Ctrl-C: last.ckpt at step 1, no backbone/
    assert not (run / "backbone").exists()
    outputs["early"] = CliRunner().invoke(app, ["export", str(run), "--out", str(root / "early")])
    outputs["early_dir"] = root / "early"
    train(config, run, stop_after=3)  # resumed, stopped again in the second epoch
    for name, source in (("dir", run), ("ckpt", run / "last.ckpt")):
        outputs[name] = CliRunner().invoke(app, ["export", str(source), "--out", str(root / name)])
        outputs[f"{name}_dir"] = root / name
    outputs["teacher_at_3"] = _checkpoint_part(run, "teacher.backbone.vit.")
    outputs["head_at_3"] = _checkpoint_part(run, "student.temporal_head.")
    train(config, run)  # finished: backbone/ is what a finished run exports
    assert (run / "backbone" / "model.safetensors").is_file()
    return outputs


def test_run_dir_and_last_ckpt_export_the_latest_checkpoint_with_its_temporal_head(stopped_runs) -> None:
    for name in ("dir", "ckpt"):
        result = stopped_runs[name]
        assert result.exit_code == 0, result.output
        out = stopped_runs[f"{name}_dir"]
        assert (out / "temporal_head.safetensors").is_file() and (out / "temporal_head.json").is_file()
        assert result.stdout.strip() == str(out)  # the result on stdout, the notice on stderr
    # both exports hold the step-3 checkpoint's teacher and its student's temporal head, tensor for tensor
    for name in ("dir", "ckpt"):
        out = stopped_runs[f"{name}_dir"]
        for file, expected in (("model", "teacher_at_3"), ("temporal_head", "head_at_3")):
            exported, wanted = load_file(str(out / f"{file}.safetensors")), stopped_runs[expected]
            assert wanted and exported.keys() == wanted.keys()
            assert all(torch.equal(exported[k], wanted[k]) for k in wanted)


def test_unfinished_export_says_so_on_stderr_in_plstitch_json_and_in_the_card(stopped_runs) -> None:
    note = f"unfinished run: stopped at step 3 of {TOTAL_STEPS} (epoch 2 of 2)"
    for name in ("dir", "ckpt"):
        assert note in _one_line(stopped_runs[name].stderr)
        out = stopped_runs[f"{name}_dir"]
        meta = json.loads((out / "plstitch.json").read_text())
        assert meta["source"]["kind"] == {"dir": "run_dir", "ckpt": "checkpoint"}[name]
        status = meta["training_status"]
        assert status["finished"] is False
        assert (status["step"], status["total_steps"], status["epoch"], status["epochs"]) == (3, 4, 2, 2)
        assert status["note"] == note and status["checkpoint"].endswith("last.ckpt")
        card = ModelCard.load(out / "README.md")
        assert f"> **{note}.**" in card.text


def test_stop_in_the_first_epoch_says_the_total_is_not_recorded(stopped_runs) -> None:
    result = stopped_runs["early"]
    assert result.exit_code == 0, result.output
    note = "unfinished run: stopped at step 1 of an unrecorded total (epoch 1 of 2"
    assert note in _one_line(result.stderr)
    status = json.loads((stopped_runs["early_dir"] / "plstitch.json").read_text())["training_status"]
    assert (status["finished"], status["step"], status["total_steps"], status["epoch"]) == (False, 1, None, 1)
    assert "unfinished run: stopped at step 1" in (stopped_runs["early_dir"] / "README.md").read_text()
    assert (stopped_runs["early_dir"] / "temporal_head.safetensors").is_file()


def test_unfinished_export_has_the_layout_of_a_finished_runs_export(stopped_runs, tmp_path) -> None:
    """Same timm config and temporal-head arguments as the finished run's `backbone/` (what it exports)."""
    run = stopped_runs["run"]
    out = stopped_runs["dir_dir"]
    for name in ("config.json", "temporal_head.json"):
        assert json.loads((out / name).read_text()) == json.loads((run / "backbone" / name).read_text())
    finished = export_model(run, tmp_path / "finished")
    assert json.loads((finished / "plstitch.json").read_text())["training_status"] == {"finished": True}
    assert "unfinished run" not in (finished / "README.md").read_text()


def test_a_run_stopped_before_its_first_checkpoint_names_the_fix(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_config.json").write_text("{}")
    result = CliRunner().invoke(app, ["export", str(run), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "no last.ckpt" in result.stderr and "plstitch train --resume" in result.stderr
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()
    with pytest.raises(PublishError, match="before its first checkpoint"):
        export_model(run, tmp_path / "out")
