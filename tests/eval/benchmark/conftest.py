"""Fixtures for the `plstitch benchmark` tests: a private plstitch cache, a `folder` dataset of six MP4 clips,
a datasets file naming it beside `synthetic`, and the CLI arguments of a tiny CPU run."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.eval.data.media import write_index_video

SMALL_DATASET = {"n_videos": 6, "min_seconds": 8.0, "max_seconds": 12.0}
MODELS = "plstitch-tiny-synthetic,random-init:plstitch-tiny-synthetic"
EPOCHS = "5"  # linear-probe epochs of every run here
FOLDER_LABELS = ("cut", "cut", "stir", "stir", "pour")  # one label per second of each 5 s clip
FOLDER_SPLITS = ("train", "train", "train", "train", "test", "test")
DATASETS_TOML = """
[synthetic]
n_videos = 6
min_seconds = 8.0
max_seconds = 12.0

[clips]            # a name of our own for a `folder` dataset
adapter = "folder"
root = "clips-data"  # relative to this file
"""
runner = CliRunner()


@pytest.fixture(scope="package")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private plstitch cache (the synthetic videos are generated there once for these tests)."""
    return tmp_path_factory.mktemp("plstitch-cache")


@pytest.fixture(autouse=True)
def _private_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLSTITCH_CACHE", str(cache))


def make_folder_dataset(root: Path) -> Path:
    """A `folder` dataset: six 5 s MP4 clips (32 px, 5 fps), labels.csv with 1 label/s and a split column."""
    rows = []
    for i, split in enumerate(FOLDER_SPLITS):
        write_index_video(root / "videos" / f"clip{i}.mp4", n_frames=25, fps=5)
        rows += [(f"clip{i}", second, label, split) for second, label in enumerate(FOLDER_LABELS)]
    with (root / "labels.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([("video", "frame", "label", "split"), *rows])
    return root


@pytest.fixture(scope="module")
def datasets_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("datasets")
    make_folder_dataset(folder / "clips-data")
    path = folder / "datasets.toml"
    path.write_text(DATASETS_TOML, encoding="utf-8")
    return path


def cli_args(out: Path, datasets: str, models: str = MODELS, protocols: str = "knn,linear") -> list[str]:
    return [
        "benchmark", "--models", models, "--datasets", datasets, "--protocols", protocols, "--out", str(out),
        "--device", "cpu", "--num-workers", "0", "--epochs", EPOCHS,
    ]  # fmt: skip


def table_json(out: Path) -> dict:
    return json.loads((out / "table.json").read_text(encoding="utf-8"))
