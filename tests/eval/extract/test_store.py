"""`plstitch_eval.extract.store`: an --out that is not a store is refused before anything is written, the
preprocessing record names every setting that changes the pixels, and a resumed run redoes exactly the videos
whose files are missing or damaged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.data.datasets import VideoRecord
from plstitch_eval.data.video import ClipSampling
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract.store import check_out_folder, plan_videos, preprocessing_record
from plstitch_eval.hub import DataConfig
from plstitch_eval.preprocess import frame_plan
from plstitch_eval.store.features import (
    LOCK_DIR,
    MANIFEST,
    VIDEO_FRAMES,
    FeatureStore,
    VideoFeatures,
    file_state,
)


def test_out_folder_must_be_new_empty_or_a_store(tmp_path):
    check_out_folder(tmp_path / "new")
    (tmp_path / "ours" / LOCK_DIR).mkdir(parents=True)
    (tmp_path / "ours" / f".{MANIFEST}.123.tmp").write_text("{")
    check_out_folder(tmp_path / "ours")  # a lock folder and a manifest being written are ours
    (tmp_path / "file").write_text("x")
    with pytest.raises(FeatureStoreError, match="is a file, not a folder"):
        check_out_folder(tmp_path / "file")
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "holiday.jpg").write_bytes(b"")
    with pytest.raises(FeatureStoreError, match="not a feature store"):
        check_out_folder(tmp_path / "photos")
    (tmp_path / "photos" / MANIFEST).write_text("{}")
    check_out_folder(tmp_path / "photos")


def test_a_manifest_another_run_writes_during_the_check_is_not_foreign(tmp_path, monkeypatch):
    """Two runs starting into one new folder: the other run's manifest lands while this one lists the folder
    (the race CI once hit); the folder is a store by then, not a foreign one."""
    root = tmp_path / "shared"
    (root / LOCK_DIR).mkdir(parents=True)
    listing = Path.iterdir

    def other_run_writes_its_manifest(self):
        if self == root:
            (root / MANIFEST).write_text("{}")
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", other_run_writes_its_manifest)
    check_out_folder(root)
    assert (root / MANIFEST).exists()


def test_the_preprocessing_record_adds_only_the_settings_in_use():
    config = DataConfig.for_size(32)
    plain = preprocessing_record(config, frame_plan(config, 1.0))
    assert plain == config.to_dict()
    clip = ClipSampling(4, frame_stride=2)
    full = preprocessing_record(config, frame_plan(config, 1.0, True, clip, True))
    assert full["resize_on_decode"] is True and full["clip"] == clip.to_dict()
    assert "crop_black_margin" in full and full.items() >= plain.items()


def _record(name: str) -> VideoRecord:
    return VideoRecord(name, Path(f"/data/{name}.mp4"), np.zeros(4, np.int64), 1.0)


def test_a_resumed_run_skips_sound_files_and_redoes_missing_and_damaged_ones(tmp_path, capsys):
    store = FeatureStore.create(tmp_path / "store", {"feature_dim": 2})
    for name in ("good", "old", "damaged"):
        store.write(VideoFeatures(name, np.zeros((3, 2), np.float32), np.zeros(3, np.int64), np.arange(3.0)))
    store.path("damaged").write_bytes(b"cut short")
    manifest = store.manifest
    del manifest[VIDEO_FRAMES]["old"]  # written by a version that recorded no frame counts
    store.write_manifest(manifest)
    records = [_record(n) for n in ("good", "old", "damaged", "missing", "other rank")]

    results, jobs = plan_videos(store, records, [0, 1, 2, 3])
    assert {i: r.status for i, r in results.items()} == {0: "skipped", 1: "skipped"}
    assert [(j.index, j.video, j.source) for j in jobs] == [
        (2, "damaged", Path("/data/damaged.mp4")),
        (3, "missing", Path("/data/missing.mp4")),
    ]
    assert jobs[0].seen == file_state(store.path("damaged")) and jobs[1].seen is None
    assert store.manifest[VIDEO_FRAMES] == {"damaged": 3, "good": 3, "old": 3}
    assert "damaged: stored file unreadable" in capsys.readouterr().err
