"""Issue 64 item 1: `export-mstcn` never writes over a user's files. It writes only into a new or empty folder
or an earlier export of its own (its record, plstitch_mstcn.json, lists what it wrote); `--overwrite` replaces
an earlier export and nothing else; the export is written beside `--out` and renamed onto it, so a failed one
leaves the folder as it was."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.export_mstcn import RECORD, export_mstcn
from plstitch_eval.store.features import FeatureStore, VideoFeatures

runner = CliRunner()


def _store(root: Path, videos: dict[str, list[int]]) -> Path:
    store = FeatureStore.create(
        root, {"dataset": "gtea", "class_names": ["take", "open lid"], "splits": {"train": sorted(videos)}}
    )
    for name, labels in videos.items():
        feats = np.arange(len(labels) * 3, dtype=np.float32).reshape(len(labels), 3)
        store.write(VideoFeatures(name, feats, np.array(labels), np.arange(len(labels), dtype=float)))
    return store.root


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() if p.is_file() else None
        for p in sorted(folder.rglob("*"))
    }


def _refused(args: list[str], needle: str) -> str:
    result = runner.invoke(app, args)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len(lines) == 1 and needle in lines[0], lines
    return lines[0]


def test_a_users_mapping_and_ground_truth_are_never_written_over(tmp_path):
    store = _store(tmp_path / "store", {"video17": [0, 1, 1]})
    ms3 = tmp_path / "ms3"
    (ms3 / "groundTruth").mkdir(parents=True)
    (ms3 / "mapping.txt").write_text("0 my_phase\n")
    (ms3 / "groundTruth" / "video17.txt").write_text("my_phase\n")
    before = _snapshot(ms3)
    for extra in ([], ["--overwrite"]):
        line = _refused(
            ["export-mstcn", str(store), "--out", str(ms3), *extra], "holds groundTruth/video17.txt"
        )
        assert "which plstitch did not write" in line and "choose another --out" in line
        assert _snapshot(ms3) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ms3", "store"]  # no temp folder left beside it


def test_an_earlier_export_is_replaced_only_with_overwrite_and_loses_its_stale_files(tmp_path):
    out = tmp_path / "ms3"
    export_mstcn(_store(tmp_path / "old", {"a": [0, 1], "b": [1, 1]}), out)
    record = json.loads((out / RECORD).read_text())
    assert record["files"] == [
        "features/a.npy", "groundTruth/a.txt", "features/b.npy", "groundTruth/b.txt", "mapping.txt",
        "splits/train.split1.bundle",
    ]  # fmt: skip
    new = _store(tmp_path / "new", {"a": [1, 0, 0]})
    before = _snapshot(out)
    _refused(
        ["export-mstcn", str(new), "--out", str(out)], f"holds an MS-TCN export ({RECORD}); pass --overwrite"
    )
    assert _snapshot(out) == before

    result = runner.invoke(app, ["export-mstcn", str(new), "--out", str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert (out / "groundTruth" / "a.txt").read_text() == "open_lid\ntake\ntake\n"
    assert not (out / "features" / "b.npy").exists() and not (out / "groundTruth" / "b.txt").exists()
    assert (out / "splits" / "train.split1.bundle").read_text() == "a.txt\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ms3", "new", "old"]


def test_overwrite_keeps_a_file_the_user_added_to_an_export(tmp_path):
    out = tmp_path / "ms3"
    store = _store(tmp_path / "store", {"a": [0, 1]})
    export_mstcn(store, out)
    (out / "groundTruth" / "video17.txt").write_text("mine\n")
    before = _snapshot(out)
    line = _refused(
        ["export-mstcn", str(store), "--out", str(out), "--overwrite"], "holds groundTruth/video17.txt"
    )
    assert "--overwrite deletes only an MS-TCN export's own files" in line
    assert _snapshot(out) == before


def test_a_failed_export_leaves_the_earlier_one_whole(tmp_path):
    out = tmp_path / "ms3"
    export_mstcn(_store(tmp_path / "good", {"a": [0, 1]}), out)
    before = _snapshot(out)
    bad = _store(tmp_path / "bad", {"a": [0, 1], "b": [0, -1]})  # b has an unlabelled frame
    _refused(
        ["export-mstcn", str(bad), "--out", str(out), "--overwrite"], "MS-TCN needs a class for every frame"
    )
    assert _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "good", "ms3"]


def test_an_empty_folder_is_written_and_a_damaged_record_is_refused(tmp_path):
    store = _store(tmp_path / "store", {"a": [0, 1]})
    out = tmp_path / "ms3"
    out.mkdir()
    assert export_mstcn(store, out).videos == 1 and (out / RECORD).is_file()
    (out / RECORD).write_text("{not json")
    before = _snapshot(out)
    _refused(
        ["export-mstcn", str(store), "--out", str(out), "--overwrite"], f"{RECORD} is no export-mstcn record"
    )
    assert _snapshot(out) == before


@pytest.mark.parametrize("value", [".", ""])
def test_the_current_folder_and_an_empty_name_are_refused_as_parsed(tmp_path, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    _refused(["export-mstcn", "no-store", "--out", value], "--out")
    assert _snapshot(tmp_path) == {"notes.txt": b"mine"}
