"""trainer.py is composed of pieces with one job each; the names it held before still import from it."""

from __future__ import annotations

import ast
from pathlib import Path

from plstitch_train import trainer
from plstitch_train.run import checkpoint, plan, progress, rng, signals

MOVED = {
    checkpoint: ("CHECKPOINT_FORMAT", "load_training_checkpoint", "save_checkpoint", "export_backbone"),
    plan: ("RUNTIME_FIELDS", "TrainResult", "plan_run", "config_differences", "remove_run_files"),
    signals: ("StopSignals", "TrainingInterrupted", "resume_command"),
    rng: ("capture_rng", "restore_rng", "seed_everything"),
}


def test_old_names_are_the_same_objects() -> None:
    for module, names in MOVED.items():
        for name in names:
            assert getattr(trainer, name) is getattr(module, name), f"trainer.{name}"
            assert name in trainer.__all__


def test_pieces_do_not_import_the_loop() -> None:
    """The arrows run one way: the loop imports its pieces, no piece imports the loop."""
    for module in (checkpoint, plan, progress, rng, signals):
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {
            node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
        }
        assert "plstitch_train.trainer" not in imported, module.__name__


def test_rng_round_trip() -> None:
    import random

    import numpy as np
    import torch

    rng.seed_everything(3)
    state = rng.capture_rng(torch.device("cpu"))
    first = (torch.rand(2), np.random.rand(2), random.random())
    rng.restore_rng(state, torch.device("cpu"))
    again = (torch.rand(2), np.random.rand(2), random.random())
    assert torch.equal(first[0], again[0]) and np.array_equal(first[1], again[1]) and first[2] == again[2]
