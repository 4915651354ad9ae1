"""Issue 59 item 3: each feature file's sha256 is recorded when written and verified by every reader and by a
resumed extraction (a store from before checksums reads, noted once, and gets them on resume); labels out of
their range are refused naming file and video; every such error ends in the `plstitch extract` command that
mends it (`store_repair.redo_command`, `missing_message`)."""

from __future__ import annotations

import hashlib
import json
import logging
import shlex

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import VideoRecord
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract.store import plan_videos
from plstitch_eval.protocols.data import check_labels, check_tools
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.store.repair import CHECKSUMS, missing_message, redo_command
from tests.eval.protocols.stores import write_store

MANIFEST = {
    "dataset": "cholec80",
    "dataset_root": "/data/my cholec80",
    "class_names": ["a", "b"],
    "model": {"spec": "dinov2-vitb14", "provenance": {}},
    "fps": 1.0,
    "precision": "bf16",
    "preprocessing": {"resize_on_decode": True, "decoder": "torchcodec"},
    "splits": {"train": ["v1", "v2"], "test": ["v3"]},
    "split_scheme": "40-40",
    "split_schemes": {"40-40": {"train": ["v1", "v2"], "test": ["v3"]}, "32-8-40": {"val": ["v2"]}},
}


def _item(name: str, n: int = 6, tools: np.ndarray | None = None) -> VideoFeatures:
    features = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    return VideoFeatures(name, features, np.zeros(n, np.int64), np.arange(n, dtype=np.float64), tools)


def _store(tmp_path, *names: str) -> FeatureStore:
    store = FeatureStore.create(tmp_path / "store", MANIFEST)
    for name in names:
        store.write(_item(name))
    return store


def test_write_records_the_files_sha256_and_readers_verify_it(tmp_path):
    store = _store(tmp_path, "v1", "v2")
    recorded = store.manifest[CHECKSUMS]
    assert recorded == {v: hashlib.sha256(store.path(v).read_bytes()).hexdigest() for v in ("v1", "v2")}
    assert store.check("v1") is None and store.read("v1").features.shape == (6, 4)
    path = store.path("v1")
    data = bytearray(path.read_bytes())
    data[-20:-10] = bytes(b ^ 0x01 for b in data[-20:-10])  # same size, same header: flipped feature bits
    path.write_bytes(bytes(data))
    assert store.check("v1").startswith("its bytes changed after it was written (sha256 ")
    with pytest.raises(FeatureStoreError) as info:
        store.read_many(["v2", "v1"])
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path} changed after it was written")
    assert message.endswith("--out " + shlex.quote(str(store.root)) + " --redo v1")


def test_a_store_from_before_checksums_reads_noted_and_gets_them_on_resume(tmp_path, caplog):
    store = _store(tmp_path, "v1")
    manifest = store.manifest
    del manifest[CHECKSUMS]
    (store.root / "manifest.json").write_text(json.dumps(manifest))  # as an older plstitch wrote it
    with caplog.at_level(logging.INFO, logger="plstitch"):
        store.read("v1")
        store.read("v1")
    notes = [r.getMessage() for r in caplog.records if "records no checksum" in r.getMessage()]
    assert len(notes) == 1 and "rerun the `plstitch extract` command" in notes[0]
    record = VideoRecord("v1", str(tmp_path / "v1.mp4"), np.zeros(6, np.int64), 1.0)
    results, jobs = plan_videos(store, [record], [0])
    assert jobs == [] and results[0].status == "skipped"
    assert store.manifest[CHECKSUMS] == {"v1": hashlib.sha256(store.path("v1").read_bytes()).hexdigest()}


def test_redo_command_carries_what_the_manifest_records():
    command = redo_command("my store", MANIFEST, ["v1", "v2"])
    assert shlex.split(command) == [
        "plstitch", "extract", "--dataset", "cholec80", "--root", "/data/my cholec80",
        "--model", "dinov2-vitb14", "--fps", "1", "--precision", "bf16", "--resize-on-decode",
        "--decoder", "torchcodec", "--out", "my store", "--redo", "v1,v2",
    ]  # fmt: skip
    synthetic = redo_command("s", {**MANIFEST, "dataset": "synthetic"}, ["v1"])
    assert "--root" not in synthetic  # the synthetic set finds its own cache


def test_missing_videos_name_the_split_that_holds_them():
    assert missing_message("s", MANIFEST, ["v1", "v2"]).startswith("s lacks videos of split 'train' (v1, v2)")
    assert missing_message("s", MANIFEST, ["v2"]).endswith("--split train")  # the smallest split holding it
    other = missing_message("s", {**MANIFEST, "split_schemes": {"40-40": {}, "x": {"val": ["v9"]}}}, ["v9"])
    assert other.endswith("--split val --split-scheme x")
    loose = missing_message("s", MANIFEST, ["v7"])
    assert loose.startswith("s has no features of v7:") and loose.endswith("--videos v7")


def test_a_deleted_file_is_named_as_missing_not_as_left_out_by_split(tmp_path):
    """Issue 64: the manifest records v1 as written, so its absent file was deleted, not left out."""
    store = _store(tmp_path, "v1", "v2", "v3")
    store.path("v1").unlink()
    for read in (lambda: store.read_many(["v1", "v2"]), lambda: store.read("v1")):
        with pytest.raises(FeatureStoreError) as info:
            read()
        message = str(info.value)
        assert message.startswith(
            f"{store.path('v1')} is missing: the manifest records it as extracted (6 frames), so it was "
            "deleted or moved since"
        ), message
        assert "--split" not in message and message.endswith(" --redo v1")
    store.path("v2").unlink()
    with pytest.raises(FeatureStoreError) as info:
        store.read_many(["v1", "v2", "v3"])
    assert str(info.value).startswith(
        f"2 feature files of {store.root} are missing ({store.path('v1')}, {store.path('v2')}): "
    )
    assert str(info.value).endswith(" --redo v1,v2")
    many = [f"w{i}" for i in range(12)]  # too many to list: a plain resume extracts every missing file
    message = missing_message("s", {**MANIFEST, "video_frames": dict.fromkeys(many, 5)}, many)
    assert (
        message.startswith("12 feature files of s are missing (s/w0.safetensors, ")
        and "(12 files)" in message
    )
    assert "--redo" not in message and message.endswith("--out s")


def test_labels_out_of_range_are_refused_naming_file_and_video(tmp_path):
    store = write_store(tmp_path / "tools")
    item = store.read("train0")
    check_tools(item, store)  # as written: 0/1
    unannotated = item.tools.copy()
    unannotated[2] = -1  # a frame no annotation row covers: -1 on every tool
    check_tools(VideoFeatures("train0", item.features, item.labels, item.frame_times, unannotated), store)
    for bad in (-2, -1, 2):
        tools = item.tools.copy()
        tools[4, 1] = bad
        with pytest.raises(FeatureStoreError) as info:
            check_tools(VideoFeatures("train0", item.features, item.labels, item.frame_times, tools), store)
        message = str(info.value)
        assert f"{store.path('train0')} (video 'train0') has tool label {bad} at frame 4, tool 1" in message
        assert "--redo train0" in message
    labels = item.labels.copy()
    labels[0] = 9
    with pytest.raises(FeatureStoreError, match=r"has label 9 .*--redo train0"):
        check_labels(VideoFeatures("train0", item.features, labels, item.frame_times), store, ["a", "b"])


def test_linear_tools_refuses_a_damaged_tool_label(tmp_path):
    store = write_store(tmp_path / "tools")
    item = store.read("val1")
    item.tools[3, 0] = -2
    store.write(item)
    result = CliRunner().invoke(app, ["linear", "--features", str(store.root), "--task", "tools"])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert "val1.safetensors (video 'val1') has tool label -2 at frame 3, tool 0" in lines[0]
