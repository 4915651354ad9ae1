"""Endoscapes2023 (CVS) adapter on a tiny stand-in in the released layout (<split>/<video>_<frame>.jpg,
annotation_ds_coco.json, <split>_vids.txt): frames, raters' means at their times, the official split, and
one-line errors that name the first missing file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import cvs_at, dataset_facts, decode, get_dataset, list_datasets
from plstitch_eval.errors import DataError
from tests.eval.data.media import decode_index
from tests.eval.data.stand_ins import ENDOSCAPES, write_endoscapes


@pytest.fixture
def endo_root(tmp_path: Path) -> Path:
    return write_endoscapes(tmp_path / "endoscapes")


def test_registered_with_its_licence() -> None:
    assert "endoscapes" in list_datasets()
    facts = dataset_facts("endoscapes")
    assert facts.display_name == "Endoscapes2023" and facts.license == "CC-BY-NC-SA-4.0"


def test_plstitch_datasets_lists_endoscapes_and_jigsaws() -> None:
    result = CliRunner().invoke(app, ["datasets"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for name, says in (("endoscapes", "critical view of safety"), ("jigsaws", "one skill rating per trial")):
        at = lines.index(name)
        assert says in " ".join(lines[at : at + 4])
    assert "louo-B" in result.stdout and "split schemes: official" in result.stdout


def test_reads_frames_and_the_raters_means_at_their_times(endo_root: Path) -> None:
    ds = get_dataset("endoscapes", endo_root)
    videos = {v.name: v for v in ds.videos()}
    assert list(videos) == ["1", "2", "121", "162"] and ds.eval_fps == 1.0
    for split_videos in ENDOSCAPES.values():
        for name, (_, n_frames, cvs) in split_videos.items():
            record = videos[name]
            assert record.cvs_times.tolist() == sorted(cvs)  # seconds from the video's first released frame
            np.testing.assert_allclose(record.cvs, [cvs[s] for s in sorted(cvs)])
            assert len(record.labels) == n_frames and (record.labels == -1).all()  # no phases
    frames = list(decode(videos["1"], fps=ds.eval_fps))
    assert [decode_index(f.image) for f in frames] == list(range(12))  # 1_29375.jpg first, in time order
    at = cvs_at(videos["1"], [f.time for f in frames])
    annotated = ~np.isnan(at).any(axis=1)
    assert np.flatnonzero(annotated).tolist() == [0, 5, 10]  # one frame in five is rated
    np.testing.assert_allclose(at[10], [1.0, 1.0, 1 / 3])
    assert not any(endo_root.rglob("0000*.jpg"))  # the frame folder lives in the cache, not in the data


def test_official_split_and_a_reused_frame_folder(endo_root: Path) -> None:
    ds = get_dataset("endoscapes", endo_root)
    assert ds.splits() == {"train": ["1", "2"], "val": ["121"], "test": ["162"]}
    assert ds.split_schemes == ("official",)
    again = get_dataset("endoscapes", endo_root).videos()[0].source
    assert again == ds.videos()[0].source and len(os.listdir(again)) == 12


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            "split_file",
            r"endoscapes/val_vids\.txt: split file is missing; Endoscapes layout: train\|val\|test/",
        ),
        ("annotations", r"test/annotation_ds_coco\.json: CVS annotation file is missing"),
        ("gap", r"train/1_29500\.jpg: frame missing \(video 1 has frames 29375-29650, one every 25\)"),
        ("annotated", r"train/2_125\.jpg: frame missing"),
        ("video", r"val/121_<frame>\.jpg: no frames of video 121 \(listed in val_vids\.txt\)"),
        ("json", r"train/annotation_ds_coco\.json:1: not valid JSON"),
        ("ds", r"image '1_29375\.jpg': 'ds' must be three raters' means in \[0, 1\]"),
        ("folder", r"endoscapes/test: missing; Endoscapes layout"),
    ],
)
def test_a_damaged_copy_names_the_first_missing_file(endo_root: Path, damage: str, message: str) -> None:
    if damage == "split_file":
        (endo_root / "val_vids.txt").unlink()
    elif damage == "annotations":
        (endo_root / "test" / "annotation_ds_coco.json").unlink()
    elif damage == "gap":
        (endo_root / "train" / "1_29500.jpg").unlink()  # the 6th second of video 1
        (endo_root / "train" / "1_29525.jpg").unlink()
    elif damage == "annotated":
        (endo_root / "train" / "2_125.jpg").unlink()  # video 2's last frame, rated at 5 s
    elif damage == "video":
        for file in (endo_root / "val").glob("121_*.jpg"):
            file.unlink()
    elif damage == "json":
        (endo_root / "train" / "annotation_ds_coco.json").write_text('{"images": [')
    elif damage == "ds":
        path = endo_root / "train" / "annotation_ds_coco.json"
        coco = json.loads(path.read_text())
        coco["images"][0]["ds"] = [1, 0]
        path.write_text(json.dumps(coco))
    elif damage == "folder":
        shutil.rmtree(endo_root / "test")
    with pytest.raises(DataError, match=message) as info:
        get_dataset("endoscapes", endo_root).videos()
    assert "\n" not in str(info.value)


def test_cvs_at_gives_each_rated_frame_to_its_nearest_sample() -> None:
    from plstitch_eval.data.datasets import VideoRecord

    record = VideoRecord("1", Path("x"), np.full(12, -1), 1.0, cvs=np.array([[1.0, 0, 0], [0, 1, 0]]),
                         cvs_times=np.array([0.0, 5.0]))  # fmt: skip
    at = cvs_at(record, np.arange(0, 8, 0.5))  # sampled at 2 fps: 4.5 and 5.5 are not the rated frame
    assert np.flatnonzero(~np.isnan(at).any(axis=1)).tolist() == [0, 10]
    far = cvs_at(record, [2.0, 3.0])  # no sample within half a second of a rated frame
    assert np.isnan(far).all() and cvs_at(VideoRecord("2", Path("x"), np.zeros(1), 1.0), [0.0]) is None
