"""CholecT50 / CholecT45 adapters on a tiny stand-in written in the released layout (videos/VIDxx/000000.png,
labels/VIDxx.json with CAMMA's 15-number rows), its official splits, and one-line errors of damaged copies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.data.datasets import decode, get_dataset, labels_at, list_datasets, tools_at, triplets_at
from plstitch_eval.data.datasets.cholect50 import CHOLECT50_CHALLENGE, crossval_split
from plstitch_eval.data.datasets.cholect50_vocab import TRIPLET_MAP, TRIPLET_NAMES
from plstitch_eval.errors import ConfigError, DataError
from tests.eval.data.media import decode_index, write_index_frames

NULL_ROW = [-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1]  # 14 numbers before the phase

# video -> frames, each frame a (phase, [triplet ids]) pair; VID92 is CholecT50-only (not in CholecT45)
STAND_IN = {
    "VID01": [(0, [17]), (0, [17, 60]), (1, []), (1, [94]), (2, [77, 1])],
    "VID02": [(0, []), (3, [60]), (3, [60, 99])],
    "VID92": [(5, [82]), (6, [88, 13])],
}


def _row(triplet: int, phase: int) -> list[float]:
    """One instance as the release writes it: triplet, instrument + score + box, verb, target + score + box,
    phase."""
    _, i, v, t, _, _ = TRIPLET_MAP[triplet]
    return [triplet, i, 1.0, -1, -1, -1, -1, v, t, 1.0, -1, -1, -1, -1, phase]


def _write_stand_in(root: Path, videos: dict = STAND_IN) -> Path:
    for name, frames in videos.items():
        write_index_frames(root / "videos" / name, len(frames), pattern="{:06d}.png", start=0)
        annotations = {
            str(f): ([_row(t, phase) for t in triplets] or [[*NULL_ROW, phase]])
            for f, (phase, triplets) in enumerate(frames)
        }
        label = {"video": int(name[3:]), "fps": 1, "num_frames": len(frames), "annotations": annotations}
        (root / "labels").mkdir(parents=True, exist_ok=True)
        (root / "labels" / f"{name}.json").write_text(json.dumps(label))
    return root


@pytest.fixture
def t50_root(tmp_path: Path) -> Path:
    return _write_stand_in(tmp_path / "CholecT50")


def test_both_are_registered_with_their_facts() -> None:
    assert {"cholect50", "cholect45"} <= set(list_datasets())
    assert len(TRIPLET_NAMES) == 100 and TRIPLET_NAMES[0] == "grasper,dissect,cystic_plate"


def test_reads_frames_phases_triplets_and_instruments(t50_root: Path) -> None:
    ds = get_dataset("cholect50", t50_root)
    videos = {v.name: v for v in ds.videos()}
    assert list(videos) == ["VID01", "VID02", "VID92"] and ds.eval_fps == 1.0
    assert len(ds.triplet_names) == 100 and ds.tool_names[0] == "grasper" and ds.license == "CC-BY-NC-SA-4.0"
    for name, frames in STAND_IN.items():
        record = videos[name]
        assert record.labels.tolist() == [phase for phase, _ in frames]
        expected = np.zeros((len(frames), 100), dtype=np.int8)
        for f, (_, triplets) in enumerate(frames):
            expected[f, triplets] = 1
        np.testing.assert_array_equal(record.triplets, expected)
        instruments = np.zeros((len(frames), 6), dtype=np.int8)
        for f, (_, triplets) in enumerate(frames):
            instruments[f, [TRIPLET_MAP[t][1] for t in triplets]] = 1
        np.testing.assert_array_equal(record.tools, instruments)
    decoded = list(decode(videos["VID01"], fps=ds.eval_fps))
    assert [decode_index(f.image) for f in decoded] == [0, 1, 2, 3, 4]  # 000000.png is frame 0, at 1 fps
    times = [f.time for f in decoded]
    assert labels_at(videos["VID01"], times)[0].tolist() == [0, 0, 1, 1, 2]
    np.testing.assert_array_equal(triplets_at(videos["VID01"], times), videos["VID01"].triplets)
    np.testing.assert_array_equal(tools_at(videos["VID01"], times), videos["VID01"].tools)
    assert triplets_at(videos["VID01"], [10.0]).tolist() == [[-1] * 100]  # past the last annotated second


def test_official_splits(t50_root: Path) -> None:
    t50 = get_dataset("cholect50", t50_root)
    assert t50.split_schemes[0] == "challenge"
    assert t50.splits() == {"train": ["VID01", "VID02"], "val": [], "test": ["VID92"]}
    # fold 1 tests VID02; folds 2-5 in order, whose last five (1, 56, 4, 13, 92) validate
    assert t50.splits("crossval-1") == {"train": [], "val": ["VID01", "VID92"], "test": ["VID02"]}
    assert crossval_split(((1, 2, 3, 4), (5, 6), (7, 8, 9)), 2) == {
        "train": ["VID01", "VID02"],
        "val": ["VID03", "VID04", "VID07", "VID08", "VID09"],
        "test": ["VID05", "VID06"],
    }
    assert sorted(CHOLECT50_CHALLENGE["test"]) == [92, 96, 103, 110, 111]
    t45 = get_dataset("cholect45", t50_root)
    assert t45.video_names() == ["VID01", "VID02"]  # a CholecT50 copy: only CholecT45's videos
    assert t45.split_schemes == tuple(f"crossval-{k}" for k in range(1, 6))
    assert t45.splits("crossval-5") == {"train": ["VID02"], "val": [], "test": ["VID01"]}
    with pytest.raises(ConfigError, match="unknown split scheme 'challenge' for 'cholect45'"):
        t45.splits("challenge")


def test_official_fold_sizes() -> None:
    from plstitch_eval.data.datasets.cholect50 import CHOLECT45_FOLDS, CHOLECT50_FOLDS

    for folds, n in ((CHOLECT50_FOLDS, 50), (CHOLECT45_FOLDS, 45)):
        assert len({v for fold in folds for v in fold}) == n
        for k in range(1, 6):
            split = crossval_split(folds, k)
            assert len(split["val"]) == 5 and len(split["test"]) == n // 5
            assert len(split["train"]) == n - 5 - n // 5
            assert not set(split["train"]) & set(split["val"]) | set(split["test"]) & set(split["train"])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("label", r"labels/VID02\.json: label file is missing; CholecT50 layout: videos/VIDxx/000000\.png"),
        ("folder", r"videos/VID02: frame folder of VID02 is missing; layout: videos/VIDxx/000000\.png"),
        ("frame", r"videos/VID02/000001\.png: frame missing \(3 annotated frames\)"),
        ("json", r"labels/VID02\.json:1: not valid JSON"),
        ("rows", r"labels/VID02\.json: frame 0: each row must hold 15 numbers"),
        ("labels_dir", r"CholecT50/labels: missing; CholecT50 layout: videos/VIDxx/000000\.png"),
    ],
)
def test_a_damaged_copy_names_the_file_in_one_line(t50_root: Path, damage: str, message: str) -> None:
    if damage == "label":
        (t50_root / "labels" / "VID02.json").unlink()
    elif damage == "folder":
        shutil.rmtree(t50_root / "videos" / "VID02")
    elif damage == "frame":
        (t50_root / "videos" / "VID02" / "000001.png").unlink()
    elif damage == "json":
        (t50_root / "labels" / "VID02.json").write_text('{"annotations": {"0": [[1, 2,')
    elif damage == "rows":
        (t50_root / "labels" / "VID02.json").write_text('{"annotations": {"0": [[1, 2, 3]]}}')
    elif damage == "labels_dir":
        shutil.rmtree(t50_root / "labels")
    with pytest.raises(DataError, match=message) as info:
        get_dataset("cholect50", t50_root).videos()
    assert "\n" not in str(info.value)
