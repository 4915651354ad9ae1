"""Reproduce's presets and folder layout: one home for its paths, and light enough for the CLI to import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from plstitch_train.reproduce import train_config
from plstitch_train.reproduce.presets import ReproduceConfig, ReproduceLayout, get_reproduce_preset


def test_layout_paths(tmp_path: Path) -> None:
    config = ReproduceConfig(get_reproduce_preset("synthetic-smoke"), out=tmp_path / "out")
    layout = ReproduceLayout.of(config)
    assert layout.root == (tmp_path / "out").resolve()
    assert layout.run("pl", 1) == layout.root / "runs" / "pl-seed1"
    assert layout.run("pl", 0, reverse_time=True).name == "pl-reversed-seed0"
    assert layout.features(layout.run("mim", 2)) == layout.root / "runs" / "mim-seed2" / "features"
    assert layout.summary_json.name == "ablation.json" and layout.summary_md.parent == layout.root


def test_runs_record_the_layouts_paths(tmp_path: Path) -> None:
    config = ReproduceConfig(get_reproduce_preset("synthetic-smoke"), out=tmp_path / "rel" / ".." / "out")
    train = train_config(config, "pl", 1)
    layout = ReproduceLayout.of(config)
    assert train.cache_dir == str(layout.frame_cache)
    assert train.init == str(layout.run("random-init", 0))  # shared init: the seed-0 random-init run


def test_the_cli_lists_presets_without_loading_the_trainer() -> None:
    code = (
        "import sys, plstitch_eval.commands.reproduce\n"
        "assert 'plstitch_train.trainer' not in sys.modules, 'trainer loaded'\n"
        "assert 'plstitch_train.reproduce.run' not in sys.modules, 'orchestrator loaded'\n"
        "assert 'plstitch_train.reproduce.evaluation' not in sys.modules, 'evaluation loaded'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
