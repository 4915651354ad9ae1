import os
import signal
import stat
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file

from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.store.features import FeatureStore, VideoFeatures, claim_video, read_shapes
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


# ------------------------------------------------------------------ checking a stored file (issue 27)


def _store_with_v1(tmp_path, frames=5, dim=4):
    store = FeatureStore.create(tmp_path / "s", {**_manifest(), "feature_dim": dim})
    feats = np.arange(frames * dim, dtype=np.float32).reshape(frames, dim)
    store.write(VideoFeatures("v1", feats, np.arange(frames) % 2, np.arange(frames, dtype=np.float64)))
    return store


def test_written_file_checks_out_and_its_frames_are_recorded(tmp_path):
    store = _store_with_v1(tmp_path)
    assert store.check("v1") is None
    assert read_shapes(store.path("v1")) == (5, 4)
    assert store.manifest["video_frames"] == {"v1": 5}


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda b: b[: len(b) - 7], "truncated"),
        (lambda b: b[:5], "shorter than a safetensors header"),
        (lambda b: b + b"junk", "4 bytes beyond the data its header describes"),
        (lambda b: b"\x10" + b"\x00" * 7 + b"{not json, 16 b}", "not valid JSON"),
        (lambda b: b"\xff" * 64, "header of"),
    ],
)
def test_a_damaged_file_is_named_with_the_reason(tmp_path, damage, reason):
    store = _store_with_v1(tmp_path)
    path = store.path("v1")
    path.write_bytes(damage(path.read_bytes()))
    problem = store.check("v1")
    assert problem is not None and reason in problem and "\n" not in problem
    with pytest.raises(FeatureStoreError):
        read_shapes(path)


def test_a_readable_file_that_disagrees_with_the_manifest_fails_the_check(tmp_path):
    store = _store_with_v1(tmp_path)
    # a whole, readable file with 3 frames where the manifest recorded 5 (e.g. copied from another run)
    save_file(
        {
            "features": np.zeros((3, 4), np.float32),
            "labels": np.zeros(3, np.int64),
            "frame_times": np.zeros(3, np.float64),
        },
        str(store.path("v1")),
    )
    assert store.check("v1") == "3 frames, the manifest recorded 5"
    save_file(
        {
            "features": np.zeros((5, 8), np.float32),
            "labels": np.zeros(5, np.int64),
            "frame_times": np.zeros(5, np.float64),
        },
        str(store.path("v1")),
    )
    assert store.check("v1") == "8 features per frame, the manifest says 4"
    save_file({"features": np.zeros((5, 4), np.float32)}, str(store.path("v1")))
    assert store.check("v1") == "lacks tensors frame_times, labels"
    save_file(
        {
            "features": np.zeros((5, 4), np.float64),
            "labels": np.zeros(5, np.int64),
            "frame_times": np.zeros(5, np.float64),
        },
        str(store.path("v1")),
    )
    assert "features is F64 [5, 4], expected F32" in store.check("v1")


def test_made_differently_names_each_difference_as_old_to_new(tmp_path):
    FeatureStore.create(tmp_path / "s", _manifest("m1"))
    changed = {**_manifest("m2"), "preprocessing": {"size": 64}, "precision": "bf16"}
    with pytest.raises(FeatureStoreError) as info:
        FeatureStore.create(tmp_path / "s", changed, also_compare=("precision",))
    message = str(info.value)
    assert "model_spec: m1 -> m2; preprocessing.size: 32 -> 64; precision: (none) -> bf16" in message
    assert "{" not in message and "\n" not in message and "--overwrite" in message


def test_resuming_keeps_created_and_the_record_of_videos(tmp_path):
    store = FeatureStore.create(tmp_path / "s", {**_manifest(), "created": "first"})
    store.write(VideoFeatures("v1", np.zeros((5, 4), np.float32), np.zeros(5), np.zeros(5)))
    again = FeatureStore.create(tmp_path / "s", {**_manifest(), "created": "later"})
    assert again.manifest["video_frames"] == {"v1": 5} and again.manifest["created"] == "first"
    fresh = FeatureStore.create(tmp_path / "s", {**_manifest("m2"), "created": "new"}, overwrite=True)
    assert fresh.manifest["video_frames"] == {} and fresh.manifest["created"] == "new"
    assert fresh.videos() == []


_WRITER = """
import sys
import numpy as np
from plstitch_eval.store.features import FeatureStore, VideoFeatures
store = FeatureStore(sys.argv[1])
for i in range(int(sys.argv[3])):
    n = 1 + i % 3
    store.write(VideoFeatures(f"{sys.argv[2]}{i}", np.zeros((n, 2), np.float32), np.zeros(n), np.zeros(n)))
"""


def test_concurrent_writers_keep_each_others_manifest_entries(tmp_path):
    store = FeatureStore.create(tmp_path / "s", _manifest())
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(store.root), prefix, "40"]) for prefix in "ab"
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    recorded = store.manifest["video_frames"]
    expected = {f"{p}{i}": 1 + i % 3 for p in "ab" for i in range(40)}
    assert recorded == expected and list(recorded) == sorted(expected)
    assert store.videos() == sorted(expected)


def test_a_claim_excludes_others_and_dies_with_its_process(tmp_path):
    root = tmp_path / "s"
    first = claim_video(root, "v1")
    assert first is not None
    assert claim_video(root, "v1") is None  # held (flock: separate opens exclude each other)
    other = claim_video(root, "v2")
    assert other is not None
    first.release()
    second = claim_video(root, "v1")
    assert second is not None
    second.release()
    other.release()
    # a process that holds a claim and is killed leaves no stale lock behind
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from plstitch_eval.store.features import claim_video; "
            "c = claim_video(sys.argv[1], 'v1'); print('held', c is not None, flush=True); time.sleep(60)",
            str(root),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held True"
        assert claim_video(root, "v1") is None
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert claim_video(root, "v1") is not None
