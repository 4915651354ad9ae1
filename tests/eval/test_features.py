import os
import stat

import numpy as np
import pytest

from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.features import FeatureStore, VideoFeatures
from plstitch_eval.utils.io import atomic_path, write_text_atomic


def _manifest(spec="m1"):
    return {
        "dataset": "synthetic",
        "class_names": ["a", "b"],
        "splits": {"train": ["v1"], "test": ["v2"]},
        "model": {"spec": spec, "provenance": {"sha256": "x"}},
        "preprocessing": {"size": 32},
        "fps": 1.0,
    }


def test_roundtrip_and_splits(tmp_path):
    store = FeatureStore.create(tmp_path / "s", _manifest())
    feats = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    store.write(VideoFeatures("v1", feats, np.arange(5) % 2, np.arange(5, dtype=np.float64)))
    assert store.has("v1") and not store.has("v2")
    assert store.videos() == ["v1"]
    back = store.read_split("train")[0]
    np.testing.assert_array_equal(back.features, feats)
    assert back.labels.dtype == np.int64 and back.frame_times.dtype == np.float64
    assert not list((tmp_path / "s").glob("*.tmp"))
    with pytest.raises(FeatureStoreError, match="v2"):
        store.read("v2")


def test_refuses_to_mix_models(tmp_path):
    FeatureStore.create(tmp_path / "s", _manifest("m1")).write(
        VideoFeatures("v1", np.zeros((1, 2), np.float32), np.zeros(1), np.zeros(1))
    )
    FeatureStore.create(tmp_path / "s", _manifest("m1"))  # same settings: resumable
    with pytest.raises(FeatureStoreError, match="--overwrite"):
        FeatureStore.create(tmp_path / "s", _manifest("m2"))
    store = FeatureStore.create(tmp_path / "s", _manifest("m2"), overwrite=True)
    assert store.videos() == []


def test_length_mismatch_names_video():
    with pytest.raises(FeatureStoreError, match="vid7"):
        VideoFeatures("vid7", np.zeros((3, 2), np.float32), np.zeros(2), np.zeros(3))


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o027, 0o640)])
def test_store_files_follow_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        store = FeatureStore.create(tmp_path / "s", _manifest())
        feats = np.zeros((3, 2), np.float32)
        store.write(VideoFeatures("v1", feats, np.zeros(3, np.int64), np.arange(3, dtype=np.float64)))
    finally:
        os.umask(old)
    assert _mode(store.path("v1")) == mode  # safetensors writes 0600 files; atomic_path fixes it
    assert _mode(tmp_path / "s" / "manifest.json") == mode


def test_atomic_writes_follow_the_umask_whatever_the_writer(tmp_path, umask_022):
    target = tmp_path / "f.bin"
    with atomic_path(target) as tmp:
        tmp.unlink()  # a writer that replaces the temp file by a new private one
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o600)
        os.close(fd)
    assert _mode(target) == 0o644
    write_text_atomic(tmp_path / "t.txt", "x")
    assert _mode(tmp_path / "t.txt") == 0o644
