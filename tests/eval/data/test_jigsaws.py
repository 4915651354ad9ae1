"""JIGSAWS adapter on a tiny stand-in in the released layout (<Task>/video/<trial>_capture1.avi,
<Task>/meta_file_<Task>.txt): skill per trial, the video, LOSO / LOUO splits, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from plstitch_eval.data.datasets import dataset_facts, decode, get_dataset, list_datasets
from plstitch_eval.errors import ConfigError, DataError
from tests.eval.data.media import decode_index
from tests.eval.data.stand_ins import JIGSAWS, write_jigsaws


@pytest.fixture
def jig_root(tmp_path: Path) -> Path:
    return write_jigsaws(tmp_path / "JIGSAWS")


def test_registered_with_an_unknown_licence() -> None:
    assert "jigsaws" in list_datasets()
    assert (
        dataset_facts("jigsaws").display_name == "JIGSAWS" and dataset_facts("jigsaws").license == "unknown"
    )


def test_reads_each_trials_video_and_skill(jig_root: Path) -> None:
    ds = get_dataset("jigsaws", jig_root)
    videos = {v.name: v for v in ds.videos()}
    assert list(videos) == list(JIGSAWS["Suturing"])  # the default task
    for name, (level, items, n_frames) in JIGSAWS["Suturing"].items():
        record = videos[name]
        assert record.skill_level == level and record.skill["grs"] == sum(items)
        assert [record.skill[k] for k in ds.skill_names[1:]] == list(items)
        assert record.source.name == f"{name}_capture1.avi" and record.label_fps == 30.0
        assert len(record.labels) == n_frames and (record.labels == -1).all()
    frames = list(decode(videos["Suturing_C001"]))
    assert [decode_index(f.image) for f in frames] == list(range(6))
    assert frames[1].time == pytest.approx(1 / 30, abs=1e-3)
    right = get_dataset("jigsaws", jig_root, capture=2).videos()[0]
    assert right.source.name == "Suturing_B001_capture2.avi"
    both = get_dataset("jigsaws", jig_root, task="all").video_names()
    assert both == sorted([name for trials in JIGSAWS.values() for name in trials], key=str.lower)


def test_loso_and_louo_splits(jig_root: Path) -> None:
    ds = get_dataset("jigsaws", jig_root)
    assert ds.split_schemes[0] == "loso-1" and "louo-I" in ds.split_schemes
    assert ds.splits() == {
        "train": ["Suturing_B002", "Suturing_D002"],
        "val": [],
        "test": ["Suturing_B001", "Suturing_C001", "Suturing_D001"],
    }
    assert ds.splits("louo-D")["test"] == ["Suturing_D001", "Suturing_D002"]
    assert ds.splits("louo-H")["test"] == []  # user H has no trial in this copy


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("video", r"Suturing/video/Suturing_C001_capture1\.avi: video of Suturing_C001 is missing; JIGSAWS"),
        ("meta", r"Suturing/meta_file_Suturing\.txt: meta file is missing; JIGSAWS layout: <Task>/video/"),
        ("line", r"meta_file_Suturing\.txt:2: expected '<trial> <N\|I\|E> <GRS> <six item scores>'"),
        ("task", r"Needle_Passing/meta_file_Needle_Passing\.txt: meta file is missing"),
    ],
)
def test_a_damaged_copy_names_the_file_in_one_line(jig_root: Path, damage: str, message: str) -> None:
    task = "suturing"
    meta = jig_root / "Suturing" / "meta_file_Suturing.txt"
    if damage == "video":
        (jig_root / "Suturing" / "video" / "Suturing_C001_capture1.avi").unlink()
    elif damage == "meta":
        meta.unlink()
    elif damage == "line":
        lines = meta.read_text().splitlines()
        meta.write_text("\n".join([lines[0], "Suturing_B002\t\tX\t17", *lines[2:]]) + "\n")
    elif damage == "task":
        (jig_root / "Needle_Passing" / "meta_file_Needle_Passing.txt").unlink()
        task = "needle-passing"
    with pytest.raises(DataError, match=message) as info:
        get_dataset("jigsaws", jig_root, task=task).videos()
    assert "\n" not in str(info.value)


def test_bad_options_are_config_errors(jig_root: Path) -> None:
    with pytest.raises(ConfigError, match="unknown JIGSAWS task 'sewing'; use one of suturing, knot_tying"):
        get_dataset("jigsaws", jig_root, task="sewing")
    with pytest.raises(ConfigError, match="capture must be 1"):
        get_dataset("jigsaws", jig_root, capture=3)
