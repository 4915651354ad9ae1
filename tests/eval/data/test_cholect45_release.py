"""The cholect45 adapter on a stand-in of CholecT45's own release (data/VIDxx/000000.png, triplet/ and
instrument/VIDxx.txt, dict/): frames, triplets and tools as written, no phases, one-line errors of a damaged
copy, and `plstitch extract` + `plstitch linear --task triplets` on it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.data.datasets import decode, get_dataset, labels_at, triplets_at
from plstitch_eval.data.datasets.cholect50_vocab import PHASES, TRIPLET_MAP, TRIPLET_NAMES
from plstitch_eval.errors import DataError
from plstitch_eval.store.features import FeatureStore
from tests.eval.data.media import decode_index
from tests.eval.data.stand_ins import CHOLECT45, write_cholect45
from tests.eval.tasks.t50_stand_in import extract_t50, write_t50


@pytest.fixture
def t45_root(tmp_path: Path) -> Path:
    return write_cholect45(tmp_path / "CholecT45")


def expected_rows(triplets: list[list[int]], column: int | None) -> np.ndarray:
    """The multi-hot a video's frames give, built here from the triplet ids (column 1: instruments)."""
    n = 100 if column is None else 6
    out = np.zeros((len(triplets), n), dtype=np.int8)
    for frame, ids in enumerate(triplets):
        for t in ids:
            out[frame, t if column is None else TRIPLET_MAP[t][column]] = 1
    return out


def test_reads_frames_triplets_and_tools_and_no_phases(t45_root: Path) -> None:
    ds = get_dataset("cholect45", t45_root)
    assert ds.layout == "release" and ds.class_names == [] and ds.triplet_names == list(TRIPLET_NAMES)
    videos = {v.name: v for v in ds.videos()}
    assert list(videos) == list(CHOLECT45)
    for name, triplets in CHOLECT45.items():
        record = videos[name]
        assert record.source == t45_root / "data" / name and record.folder_fps == 1.0
        assert record.labels.tolist() == [-1] * len(triplets)
        np.testing.assert_array_equal(record.triplets, expected_rows(triplets, None))
        np.testing.assert_array_equal(record.tools, expected_rows(triplets, 1))
        assert record.triplet_times.tolist() == record.tool_times.tolist() == list(range(len(triplets)))
    decoded = list(decode(videos["VID05"], fps=ds.eval_fps))
    assert [decode_index(f.image) for f in decoded] == list(range(6))  # 000000.png is second 0
    times = [f.time for f in decoded]
    assert labels_at(videos["VID05"], times)[0].tolist() == [-1] * 6
    np.testing.assert_array_equal(
        triplets_at(videos["VID05"], times), expected_rows(CHOLECT45["VID05"], None)
    )
    assert ds.splits("crossval-1") == {"train": ["VID05", "VID10"], "val": ["VID01"], "test": ["VID02"]}


def test_a_cholect50_copy_keeps_its_phases(tmp_path: Path) -> None:
    copy = get_dataset("cholect45", write_t50(tmp_path / "CholecT50"))
    assert copy.layout == "cholect50-copy" and copy.class_names == list(PHASES)
    assert get_dataset("cholect45", write_cholect45(tmp_path / "T45")).class_names == []
    assert copy.class_names == list(PHASES)  # the release's empty list is its own, not the class's


def _damage(root: Path, damage: str) -> None:
    if damage == "dict":
        lines = (root / "dict" / "triplet.txt").read_text().splitlines()
        lines[5], lines[6] = lines[6], lines[5]
        (root / "dict" / "triplet.txt").write_text("\n".join(lines) + "\n")
    elif damage == "short_dict":
        (root / "dict" / "instrument.txt").write_text("0:grasper\n1:bipolar\n")
    elif damage == "columns":
        path = root / "triplet" / "VID02.txt"
        lines = path.read_text().splitlines()
        lines[2] = lines[2].rsplit(",", 1)[0]
        path.write_text("\n".join(lines) + "\n")
    elif damage == "integer":
        path = root / "instrument" / "VID10.txt"
        lines = path.read_text().splitlines()
        lines[1] = lines[1].replace(",1", ",x", 1)
        path.write_text("\n".join(lines) + "\n")
    elif damage == "label":
        path = root / "triplet" / "VID01.txt"
        path.write_text(path.read_text().replace(",0", ",2", 1))
    elif damage == "triplet_file":
        (root / "triplet" / "VID05.txt").unlink()
    elif damage == "instrument_dir":
        shutil.rmtree(root / "instrument")
    elif damage == "frame":
        (root / "data" / "VID10" / "000002.png").unlink()
    elif damage == "frame_folder":
        shutil.rmtree(root / "data" / "VID01")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            "dict",
            r"dict/triplet\.txt:6: '6:grasper,grasp,cystic_plate' differs from .* '5:grasper,grasp,cystic_p",
        ),
        ("short_dict", r"dict/instrument\.txt:3: 'the end of the file' differs from .* '2:hook'"),
        ("columns", r"triplet/VID02\.txt:3: expected 101 comma-separated integers .* got 100 columns"),
        ("integer", r"instrument/VID10\.txt:2: column \d+ is 'x', expected a label 0 or 1"),
        ("label", r"triplet/VID01\.txt:1: column 2 is '2', expected a label 0 or 1"),
        ("triplet_file", r"triplet/VID05\.txt: label file is missing; CholecT45 release layout: data/VIDxx/"),
        ("instrument_dir", r"CholecT45/instrument: folder is missing; CholecT45 release layout"),
        ("frame", r"data/VID10/000002\.png: frame missing \(4 annotated frames\)"),
        ("frame_folder", r"data/VID01: frame folder of VID01 is missing; layout: data/VIDxx/000000\.png"),
    ],
)
def test_a_damaged_release_is_one_line_naming_the_file(t45_root: Path, damage: str, message: str) -> None:
    _damage(t45_root, damage)
    with pytest.raises(DataError, match=message) as info:
        get_dataset("cholect45", t45_root).videos()
    assert "\n" not in str(info.value)


def test_a_non_integer_frame_index_is_named(t45_root: Path) -> None:
    path = t45_root / "triplet" / "VID10.txt"
    lines = path.read_text().splitlines()
    lines[3] = "3.0" + lines[3][1:]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=r"triplet/VID10\.txt:4: frame index '3\.0' is not an integer >= 0"):
        get_dataset("cholect45", t45_root).videos()


def test_extract_then_linear_triplets(tmp_path: Path) -> None:
    root = write_cholect45(tmp_path / "CholecT45")
    store = FeatureStore(extract_t50(root, tmp_path / "S", dataset="cholect45"))
    manifest = store.manifest
    assert manifest["dataset"] == "cholect45" and manifest["class_names"] == []
    assert manifest["split_scheme"] == "crossval-1" and manifest["splits"]["test"] == ["VID02"]
    for name, triplets in CHOLECT45.items():
        features = store.read(name)
        assert features.labels.tolist() == [-1] * len(triplets)
        np.testing.assert_array_equal(features.triplets, expected_rows(triplets, None))
        np.testing.assert_array_equal(features.tools, expected_rows(triplets, 1))
    out = tmp_path / "t.json"
    args = [
        "linear",
        "--features",
        str(store.root),
        "--task",
        "triplets",
        "--epochs",
        "2",
        "--json",
        str(out),
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["task"] == "linear-triplets" and list(results["predictions"]) == ["VID02"]
    assert np.array(results["predictions"]["VID02"]).shape == (len(CHOLECT45["VID02"]), 100)
    assert 0 < results["metrics"]["mAP_IVT"] <= 100


def test_a_root_of_neither_layout_names_both(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        DataError, match=r"empty/labels: missing; CholecT45 layout: videos/VIDxx/.*release: data/"
    ):
        get_dataset("cholect45", tmp_path / "empty").videos()
