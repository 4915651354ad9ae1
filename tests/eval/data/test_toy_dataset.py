"""A new dataset is one adapter class registered with `@register_dataset`: a toy adapter declared only here,
over tiny videos and labels the test writes, is listed by `plstitch datasets` and goes through `plstitch
extract` and `plstitch knn` end to end."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord, registered_dataset
from plstitch_eval.data.datasets.base import find_source
from plstitch_eval.data.datasets.registry import (
    dataset_class,
    dataset_facts,
    describe_datasets,
    list_datasets,
    unregister_dataset,
)
from plstitch_eval.errors import ConfigError
from plstitch_eval.store.features import FeatureStore
from tests.media import write_video

runner = CliRunner()
NAME = "toy-colours"
COLOURS = {"red": (200, 30, 30), "green": (30, 200, 30), "blue": (30, 30, 200)}
# video -> (split, one colour per second); every colour is in train and in test
VIDEOS = {
    "toy1": ("train", ["red", "red", "green", "blue"]),
    "toy2": ("train", ["blue", "green", "green", "red"]),
    "toy3": ("test", ["green", "red", "blue", "blue"]),
    "toy4": ("test", ["red", "blue", "green"]),
}
NATIVE_FPS = 10
LABELS_FILE = "labels.json"


class ToyColours(DatasetAdapter):
    """Toy videos of plain colours: `clips/<video>.mp4`, `labels.json` {video: [split, [colour a second]]}."""

    name = NAME
    display_name = "Toy colours"
    class_names = list(COLOURS)
    native_fps = 1.0
    default_eval_fps = 1.0

    def __init__(self, root: str | os.PathLike, fps: float | None = None) -> None:
        super().__init__(root, fps)
        self.table = json.loads((self.root / LABELS_FILE).read_text())

    def _load(self) -> list[VideoRecord]:
        index = self.class_index()
        return [
            VideoRecord(
                video, find_source(video, [self.root / "clips"]), np.array([index[c] for c in colours]), 1.0
            )
            for video, (_, colours) in self.table.items()
        ]

    def _scheme_splits(self, scheme: str, names: list[str]) -> dict[str, list[str]]:
        return {split: [n for n in names if self.table[n][0] == split] for split in ("train", "test")}


def write_toy_dataset(root: Path) -> Path:
    """Each second of each video is its colour (plus a little noise) at 10 fps, 32x24 px."""
    rng = np.random.default_rng(0)
    for video, (_, colours) in VIDEOS.items():
        frames = [
            np.clip(np.array(COLOURS[c]) + rng.integers(-20, 20, (24, 32, 3)), 0, 255).astype(np.uint8)
            for c in colours
            for _ in range(NATIVE_FPS)
        ]
        write_video(root / "clips" / f"{video}.mp4", frames, fps=NATIVE_FPS)
    (root / LABELS_FILE).write_text(json.dumps(VIDEOS))
    return root


@pytest.fixture
def toy_dataset(tmp_path: Path) -> Iterator[Path]:
    """The toy adapter registered as `toy-colours` for one test, over a folder it writes; removed after."""
    root = write_toy_dataset(tmp_path / "toy")
    with registered_dataset(NAME, ToyColours):
        yield root
    assert NAME not in list_datasets()


def test_the_toy_dataset_is_listed_and_its_facts_come_from_the_adapter(toy_dataset: Path) -> None:
    result = runner.invoke(app, ["datasets"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert NAME in result.stdout
    row = next(row for row in describe_datasets() if row["name"] == NAME)
    assert row["summary"].startswith("Toy videos of plain colours") and row["classes"] == list(COLOURS)
    assert dataset_facts(NAME).display_name == "Toy colours" and dataset_facts(NAME).family == "surgical"


def test_extract_and_knn_run_end_to_end_on_the_toy_dataset(toy_dataset: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    extract = ["extract", "--dataset", NAME, "--root", str(toy_dataset), "--out", str(store),
               "--model", "raw-pixels", "--num-workers", "0", "--device", "cpu"]  # fmt: skip
    result = runner.invoke(app, extract)
    assert result.exit_code == 0, result.output
    features = FeatureStore(store)
    assert features.videos() == list(VIDEOS) and features.class_names == list(COLOURS)
    assert features.splits()["train"] == ["toy1", "toy2"] and features.splits()["test"] == ["toy3", "toy4"]
    for video, (_, colours) in VIDEOS.items():
        item = features.read(video)
        assert item.features.shape == (len(colours), 192)  # one frame a second, raw 8x8x3 pixels
        np.testing.assert_array_equal(item.labels, [list(COLOURS).index(c) for c in colours])
    knn = runner.invoke(
        app, ["knn", "--features", str(store), "--k", "1", "--json", str(tmp_path / "knn.json")]
    )
    assert knn.exit_code == 0, knn.output
    report = json.loads((tmp_path / "knn.json").read_text())
    assert report["task"] == "knn" and report["dataset"] == NAME
    assert report["splits"]["test"] == ["toy3", "toy4"] and set(report["per_video"]) == {"toy3", "toy4"}
    assert report["metrics"]["accuracy"] == pytest.approx(100.0)  # plain colours: the nearest frame agrees


def test_an_adapter_name_is_registered_once() -> None:
    other = type("Other", (ToyColours,), {})
    with registered_dataset(NAME, ToyColours):
        with pytest.raises(ConfigError, match="already registered, by"), registered_dataset(NAME, other):
            pass
        assert NAME in list_datasets() and dataset_class(NAME) is ToyColours
    assert NAME not in list_datasets()
    unregister_dataset(NAME)  # a name not registered is ignored
