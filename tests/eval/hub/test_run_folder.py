"""Run-folder layout: names, recognising a run (finished or not), resolving its parts, reading its files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plstitch_eval.errors import ModelNotFoundError, RunFolderError
from plstitch_eval.hub import DataConfig, load_encoder, save_timm_dir
from plstitch_eval.hub.ranking_head import resolve_head_source
from plstitch_eval.hub.run_folder import (
    BACKBONE_DIR,
    CHECKPOINT_NAME,
    LOG_NAME,
    RUN_FILES,
    TRAIN_CONFIG_NAME,
    backbone_dir,
    checkpoint_path,
    is_finished,
    is_run_dir,
    present_run_files,
    read_log,
    read_train_config,
    resolve_backbone_dir,
    train_config_path,
)
from tests.eval.hub.conftest import make_tiny_vit


def _fake_timm_dir(folder: Path) -> None:
    """The two files that make a folder timm-format (contents are not read here)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")


def test_names_are_the_trainers_layout() -> None:
    assert (BACKBONE_DIR, CHECKPOINT_NAME, TRAIN_CONFIG_NAME, LOG_NAME) == (
        "backbone",
        "last.ckpt",
        "train_config.json",
        "log.jsonl",
    )
    assert RUN_FILES[0] == BACKBONE_DIR  # removed first: a half-deleted run never looks finished


def test_a_run_is_recognised_finished_or_not(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    assert not is_run_dir(run) and not is_run_dir(tmp_path / "absent") and present_run_files(run) == []
    (run / CHECKPOINT_NAME).write_bytes(b"")
    assert is_run_dir(run) and not is_finished(run) and resolve_backbone_dir(run) is None
    assert not is_run_dir(run / CHECKPOINT_NAME)  # a file is no run folder
    _fake_timm_dir(run / BACKBONE_DIR)
    assert is_finished(run) and resolve_backbone_dir(run) == backbone_dir(run) == run / BACKBONE_DIR
    assert present_run_files(run) == [BACKBONE_DIR, CHECKPOINT_NAME]
    only_config = tmp_path / "configured"
    only_config.mkdir()
    train_config_path(only_config).write_text("{}")
    assert is_run_dir(only_config) and not is_finished(only_config)


def test_a_plain_timm_folder_resolves_to_itself(tmp_path: Path) -> None:
    _fake_timm_dir(tmp_path / "exported")
    assert resolve_backbone_dir(tmp_path / "exported") == tmp_path / "exported"
    assert not is_run_dir(tmp_path / "exported")


def test_checkpoint_path_of_a_folder_or_a_file(tmp_path: Path) -> None:
    assert checkpoint_path(tmp_path) == tmp_path / CHECKPOINT_NAME
    assert checkpoint_path(tmp_path / "other.ckpt") == tmp_path / "other.ckpt"


def test_read_train_config(tmp_path: Path) -> None:
    assert read_train_config(tmp_path) is None
    train_config_path(tmp_path).write_text(json.dumps({"seed": 3}))
    assert read_train_config(tmp_path) == {"seed": 3}
    train_config_path(tmp_path).write_text('{"seed": 3,\n oops}')
    with pytest.raises(RunFolderError, match=r"train_config.json line 2: invalid JSON"):
        read_train_config(tmp_path)
    train_config_path(tmp_path).write_text("[1, 2]")
    with pytest.raises(RunFolderError, match="holds a list, not a training config"):
        read_train_config(tmp_path)


def test_read_log_skips_a_torn_last_line(tmp_path: Path) -> None:
    assert read_log(tmp_path) == []
    (tmp_path / LOG_NAME).write_text('{"step": 1}\n\n{"step": 2}\n{"step": 3, "lo')
    assert read_log(tmp_path) == [{"step": 1}, {"step": 2}]


def test_loaders_resolve_runs_through_the_layout(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / CHECKPOINT_NAME).write_bytes(b"")
    # unfinished: the encoder names the run and the way forward; the head loader falls back to last.ckpt
    with pytest.raises(ModelNotFoundError, match="unfinished training run .*plstitch export"):
        load_encoder(run)
    assert resolve_head_source(run) == run / CHECKPOINT_NAME
    save_timm_dir(make_tiny_vit(), backbone_dir(run), DataConfig.for_size(32))
    assert load_encoder(run).provenance["path"] == str((backbone_dir(run) / "model.safetensors").resolve())
