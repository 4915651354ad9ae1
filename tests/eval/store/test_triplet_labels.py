"""The feature store keeps action triplets beside phases and tools: `plstitch extract` of the CholecT50
stand-in writes each frame's 100-triplet row and the manifest's `triplet_names`; a store without triplets
is written byte for byte as before (no tensor, no manifest key); a triplet tensor of the wrong length is
named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from plstitch_eval.data.datasets import get_dataset, labels_at, tools_at, triplets_at
from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_NAMES
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract.store import triplet_names
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from tests.eval.tasks.t50_stand_in import FRAMES, VIDEOS, extract_t50, write_t50

MANIFEST = {
    "dataset": "selection-test",
    "class_names": ["a", "b"],
    "splits": {"train": ["v"], "test": []},
    "model": {"spec": "tiny-test-encoder", "provenance": {"sha256": "0" * 64}},
    "fps": 1.0,
}


@pytest.fixture(scope="module")
def t50(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, FeatureStore]:
    root = write_t50(tmp_path_factory.mktemp("t50") / "CholecT50")
    return root, FeatureStore(extract_t50(root, tmp_path_factory.mktemp("t50-store") / "store"))


def test_extraction_keeps_each_frames_triplets_and_their_names(t50: tuple[Path, FeatureStore]) -> None:
    root, store = t50
    assert store.manifest["triplet_names"] == list(TRIPLET_NAMES)
    assert store.videos() == sorted(f"VID{n:02d}" for numbers in VIDEOS.values() for n in numbers)
    records = {record.name: record for record in get_dataset("cholect50", root).videos()}
    for video in store.videos():
        item, record = store.read(video), records[video]
        assert store.check(video) is None
        assert item.triplets is not None and item.triplets.dtype == np.int8
        assert item.triplets.shape == (FRAMES, 100) and len(item.features) == FRAMES
        np.testing.assert_array_equal(item.triplets, triplets_at(record, item.frame_times))
        np.testing.assert_array_equal(item.triplets, record.triplets)  # 1 fps frames = 1 fps labels
        np.testing.assert_array_equal(item.tools, tools_at(record, item.frame_times))
        np.testing.assert_array_equal(item.labels, labels_at(record, item.frame_times)[0])
    assert sum(int(store.read(v).triplets.sum()) for v in store.videos()) > 0


def test_a_store_without_triplets_is_written_as_before(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    item = VideoFeatures(
        "v",
        rng.normal(size=(5, 3)).astype(np.float32),
        np.array([0, 1, 1, -1, 0]),
        np.arange(5, dtype=np.float64),
        tools=np.array([[1, 0]] * 5, np.int8),
    )
    store = FeatureStore.create(tmp_path / "s", MANIFEST)
    store.write(item)
    before = tmp_path / "before.safetensors"  # what the store wrote before triplets existed
    tensors = {"features": item.features, "labels": item.labels, "frame_times": item.frame_times}
    save_file({**tensors, "tools": item.tools}, str(before), metadata={"video": "v"})
    assert store.path("v").read_bytes() == before.read_bytes()
    assert store.read("v").triplets is None and "triplet_names" not in store.manifest
    cholec80 = tmp_path / "cholec80"
    cholec80.mkdir()
    assert triplet_names(get_dataset("cholec80", cholec80)) == {}  # its manifest gains no key


def test_triplet_rows_must_match_the_frames(tmp_path: Path) -> None:
    features, labels, times = np.zeros((4, 3), np.float32), np.zeros(4, np.int64), np.arange(4.0)
    with pytest.raises(FeatureStoreError, match="triplet labels must be"):
        VideoFeatures("v", features, labels, times, triplets=np.zeros((5, 100), np.int8))
    store = FeatureStore.create(tmp_path / "s", MANIFEST)
    tensors = {"features": features, "labels": labels, "frame_times": times}
    save_file({**tensors, "triplets": np.zeros((5, 100), np.int8)}, str(store.path("v")))
    assert store.check("v") == "features have 4 rows, triplets 5"
    save_file({**tensors, "triplets": np.zeros((4, 100), np.float32)}, str(store.path("v")))
    assert "triplets is F32 [4, 100], expected I8 with 2 dims" in str(store.check("v"))
