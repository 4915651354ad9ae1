"""k-NN while it trains: the logged accuracy is `plstitch extract` + `plstitch knn`'s on the same backbone,
the evaluation leaves what a run computes unchanged, a resume keeps one series, bad input is one line."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from plstitch_eval.data.datasets import registered_dataset
from plstitch_eval.data.datasets.synthetic import Synthetic
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import extract_features
from plstitch_eval.extract.options import ExtractOptions
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.run_folder import CHECKPOINT_NAME, KNN_EVAL_NAME, KNN_FRAMES_DIR, LOG_NAME
from plstitch_eval.protocols.knn import run_knn
from plstitch_eval.utils.console import logger
from plstitch_train.run.plan import RUNTIME_FIELDS
from plstitch_train.run.progress import LiveLine
from plstitch_train.trainer import load_training_checkpoint, train
from tests.train.conftest import tiny_config

TOY = "knn-toy"
EVAL_FIELDS = ("eval_every", "eval_dataset", "eval_root", "eval_split", "eval_fps")


class _TinySynthetic(Synthetic):
    """Six 6-8 s synthetic videos of 32 px (4 train, 2 test, no val): a k-NN evaluation in a second."""

    def __init__(self, root: str | None = None, fps: float | None = None) -> None:
        super().__init__(root, fps, n_videos=6, size=32, min_seconds=6, max_seconds=8, workers=1)


@pytest.fixture(scope="module")
def toy_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The toy dataset, registered as `knn-toy` while this module runs."""
    root = tmp_path_factory.mktemp("knn_toy")
    with registered_dataset(TOY, _TinySynthetic):
        _TinySynthetic(root)  # generated once
        yield root


def _log(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / LOG_NAME).read_text().splitlines()]


def test_the_logged_knn_equals_extract_and_knn_on_the_exported_backbone(
    video_dir: Path, frame_cache: Path, toy_root: Path, tmp_path: Path
) -> None:
    config = tiny_config(
        video_dir, frame_cache, max_steps=4, eval_every=3, eval_dataset=TOY, eval_root=str(toy_root)
    )
    run_dir = tmp_path / "run"
    train(config, run_dir)
    evaluated = [r for r in _log(run_dir) if "knn_acc" in r]
    assert [r["step"] for r in evaluated] == [0, 3, 4]  # the init, every 3 steps and the last
    assert all(r["knn_seconds"] > 0 for r in evaluated)
    assert any(p.suffix == ".npy" for p in (run_dir / KNN_FRAMES_DIR).iterdir())  # decoded once, kept

    store = tmp_path / "store"
    options = ExtractOptions(fps=1.0, device="cpu", precision="fp32", num_workers=0, progress=False)
    extract_features(TOY, load_encoder(str(run_dir)), store, options, root=toy_root)
    metrics = run_knn(store)["metrics"]
    assert evaluated[-1]["knn_acc"] == pytest.approx(metrics["accuracy"], abs=1e-9)
    assert evaluated[-1]["knn_f1"] == pytest.approx(metrics["macro_f1_video"], abs=1e-9)

    summary = json.loads((run_dir / KNN_EVAL_NAME).read_text())
    best = max(evaluated, key=lambda r: (r["knn_acc"], -r["step"]))
    assert summary["knn_best"] == {"step": best["step"], "knn_acc": best["knn_acc"]}
    assert summary["query_split"] == "test"  # the toy dataset has no val split
    assert [e["step"] for e in summary["evaluations"]] == [0, 3, 4]


def test_evaluating_changes_nothing_and_a_resume_keeps_one_series(
    video_dir: Path, frame_cache: Path, toy_root: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=4, batch_size=16)
    without = train(config, tmp_path / "without")
    evaluating = config.replace(eval_every=1, eval_dataset=TOY, eval_root=str(toy_root))
    run_dir = tmp_path / "with"
    measured = train(evaluating, run_dir, stop_after=2)
    # as if killed after evaluating step 3 but before its checkpoint: that evaluation is dropped on resume
    path = run_dir / KNN_EVAL_NAME
    summary = json.loads(path.read_text())
    summary["evaluations"].append({"step": 3, "knn_acc": 101.0, "knn_f1": 0.0, "knn_seconds": 0.0})
    path.write_text(json.dumps(summary))
    resumed = train(resume=run_dir / CHECKPOINT_NAME)

    keys = ("loss", "vid", "mim", "jigsaw")
    assert [[r[k] for k in keys] for r in without.history] == [
        [r[k] for k in keys] for r in measured.history + resumed.history
    ]
    expected = load_training_checkpoint(tmp_path / "without" / CHECKPOINT_NAME)["model"]
    got = load_training_checkpoint(run_dir / CHECKPOINT_NAME)["model"]
    for key in expected:
        assert torch.equal(expected[key], got[key]), key

    log = _log(run_dir)
    assert [r["step"] for r in log] == [0, 1, 2, 3, 4]  # step 0: the initialisation's k-NN, no losses
    assert all("knn_acc" in r for r in log) and "loss" not in log[0]
    summary = json.loads(path.read_text())
    assert [e["step"] for e in summary["evaluations"]] == [0, 1, 2, 3, 4]
    assert [e["knn_acc"] for e in summary["evaluations"]] == [r["knn_acc"] for r in log]
    assert summary["knn_best"]["knn_acc"] == max(r["knn_acc"] for r in log) <= 100.0


def test_the_evaluation_settings_may_change_on_resume() -> None:
    assert set(EVAL_FIELDS) <= set(RUNTIME_FIELDS)


def test_bad_evaluation_input_is_one_line_before_training(
    video_dir: Path, frame_cache: Path, toy_root: Path, tmp_path: Path
) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=2)
    with pytest.raises(ConfigError, match="needs eval_dataset"):
        config.replace(eval_every=2)
    with pytest.raises(ConfigError, match="eval_split must be val, test"):
        config.replace(eval_split="train")
    with pytest.raises(ConfigError, match="nknown dataset 'nope'"):
        train(config.replace(eval_every=2, eval_dataset="nope"), tmp_path / "a")
    with pytest.raises(ConfigError, match="needs its folder"):
        train(config.replace(eval_every=2, eval_dataset="cholec80"), tmp_path / "b")
    with pytest.raises(ConfigError, match="'val' split holds no videos"):
        bad = config.replace(eval_every=2, eval_dataset=TOY, eval_root=str(toy_root), eval_split="val")
        train(bad, tmp_path / "c")
    assert not (tmp_path / "c" / CHECKPOINT_NAME).exists()

    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    config_file = tmp_path / "config.json"
    config_file.write_text(json.dumps(config.to_dict()))
    args = ["train", "--config", str(config_file), "--out", str(tmp_path / "cli")]
    result = CliRunner().invoke(app, [*args, "--eval-every", "2", "--eval-dataset", "nope"])
    assert result.exit_code != 0 and "nknown dataset 'nope'" in result.output
    assert "Traceback" not in result.output


def test_the_live_line_shows_knn_and_a_collapse_flag() -> None:
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler, level = Keep(level=logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        live = LiveLine(total=3, start=0, enabled=True, log_every=1)
        live.interactive = False  # the logged form of the line
        base = {"loss": 1.0, "lr": 1e-3, "samples_per_s": 10.0}
        live.update(1, {**base, "knn_acc": 64.25, "collapse_entropy_ratio": 0.5})
        live.update(2, base, collapsed=True)  # the latest values stay shown
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert "kNN 64.2" in lines[0] and "H/logK 0.50" in lines[0] and "COLLAPSE?" not in lines[0]
    assert "kNN 64.2" in lines[1] and "COLLAPSE?" in lines[1]
