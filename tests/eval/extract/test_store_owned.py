"""Issue 44: an `--out` store whose manifest.json was deleted holds only files a store writes
(`features.store_owned`); `check_out_folder` lets `--overwrite` start it again, refuses it without, and still
refuses any folder holding anything else; `FeatureStore.create(overwrite=True)` deletes only those files."""

from __future__ import annotations

import os

import pytest

from plstitch_eval.errors import ConfigError, FeatureStoreError
from plstitch_eval.extract.store import check_out_folder
from plstitch_eval.store.features import LOCK_DIR, MANIFEST, FeatureStore, store_owned

MANIFEST_OF_A_RUN = {"dataset": "toy", "model": {"spec": "toy", "provenance": {}}, "fps": 1.0}


def _lost_manifest_store(root):
    """A store folder as a run leaves it, less its manifest: features (one in a video subfolder), a feature
    file and a manifest being written, the lock folder."""
    (root / LOCK_DIR).mkdir(parents=True)
    (root / LOCK_DIR / "store.lock").write_bytes(b"")
    (root / "video01.safetensors").write_bytes(b"x")
    (root / "P03" / "cam01").mkdir(parents=True)
    (root / "P03" / "cam01" / "P03_coffee.safetensors").write_bytes(b"x")
    (root / ".video02.safetensors.a1b2.tmp").write_bytes(b"x")
    (root / f".{MANIFEST}.c3d4.tmp").write_text("{")
    return root


def test_the_entries_a_store_writes_are_its_own_and_nothing_else(tmp_path):
    root = _lost_manifest_store(tmp_path / "store")
    assert all(store_owned(entry) for entry in root.iterdir())
    (tmp_path / "other").mkdir()
    foreign = {
        "notes.txt": "a user's file",
        "video01.safetensors.bak": "not a feature file",
        ".hidden.safetensors": "hidden, not written by a store",
        ".draft.tmp": "a temp file of some other program",
    }
    for name, text in foreign.items():
        (tmp_path / "other" / name).write_text(text)
        assert not store_owned(tmp_path / "other" / name), name
    (tmp_path / "other" / "P04").mkdir()
    (tmp_path / "other" / "P04" / "a.safetensors").write_bytes(b"x")
    (tmp_path / "other" / "P04" / "b.mp4").write_bytes(b"x")
    assert not store_owned(tmp_path / "other" / "P04")  # a folder with one foreign file is foreign
    os.symlink(root / "video01.safetensors", tmp_path / "other" / "link.safetensors")
    assert not store_owned(tmp_path / "other" / "link.safetensors")  # a link points at someone's file


def test_a_manifest_less_store_is_started_again_only_with_overwrite(tmp_path):
    root = _lost_manifest_store(tmp_path / "store")
    check_out_folder(root)  # before the run's settings are known: open_store decides
    check_out_folder(root, overwrite=True)
    with pytest.raises(FeatureStoreError) as info:
        check_out_folder(root, overwrite=False)
    message = str(info.value)
    assert "\n" not in message and f"no {MANIFEST}" in message and "pass --overwrite" in message
    (root / "notes.txt").write_text("mine")
    for overwrite in (None, True, False):
        with pytest.raises(FeatureStoreError, match="not a feature store"):
            check_out_folder(root, overwrite=overwrite)


def test_create_with_overwrite_deletes_only_the_store_files(tmp_path):
    root = _lost_manifest_store(tmp_path / "store")
    FeatureStore.create(root, MANIFEST_OF_A_RUN, overwrite=True)
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    assert left == [LOCK_DIR, f"{LOCK_DIR}/store.lock", MANIFEST]
    assert FeatureStore(root).manifest["dataset"] == "toy"


def test_create_with_overwrite_refuses_a_folder_holding_a_users_file(tmp_path):
    # issue 59: FeatureStore.create is also library API; a user's file is named and nothing is deleted
    root = _lost_manifest_store(tmp_path / "store")
    (root / "notes.txt").write_text("mine")
    before = sorted(p.relative_to(root).as_posix() for p in root.rglob("*"))
    with pytest.raises(ConfigError, match="holds notes.txt, which plstitch did not write") as info:
        FeatureStore.create(root, MANIFEST_OF_A_RUN, overwrite=True)
    assert "\n" not in str(info.value)
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*")) == before


def test_create_without_overwrite_keeps_the_files_as_before(tmp_path):
    root = _lost_manifest_store(tmp_path / "store")
    FeatureStore.create(root, MANIFEST_OF_A_RUN)
    assert (root / "video01.safetensors").exists() and (root / MANIFEST).exists()
