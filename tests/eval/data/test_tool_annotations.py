"""Tool presence labels: Cholec80's tool files, their lookup at sampled times, the synthetic ground truth, and
the feature store keeping them beside the phases."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.data.datasets import get_dataset, tools_at
from plstitch_eval.data.datasets.annotations import read_tool_tsv
from plstitch_eval.data.datasets.base import VideoRecord
from plstitch_eval.data.datasets.cholec80 import CHOLEC80_PHASES, CHOLEC80_TOOLS
from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.errors import DataError
from tests.eval.data.media import write_index_video

TINY = {"n_videos": 3, "size": 32, "min_seconds": 3.0, "max_seconds": 5.0}


def _tool_file(
    path: Path, rows: list[list[int]], columns: list[str] = CHOLEC80_TOOLS, step: int = 25
) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f"{i * step}\t" + "\t".join(map(str, r)) + "\n" for i, r in enumerate(rows))
    path.write_text("Frame\t" + "\t".join(columns) + "\n" + body)


def test_read_tool_tsv_reorders_columns_and_names_bad_lines(tmp_path: Path) -> None:
    shuffled = CHOLEC80_TOOLS[::-1]
    path = tmp_path / "v-tool.txt"
    _tool_file(path, [[1, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1, 1]], columns=shuffled)
    frames, presence = read_tool_tsv(path, CHOLEC80_TOOLS)
    assert frames.tolist() == [0, 25]
    assert presence.tolist() == [[1, 0, 0, 0, 0, 0, 1], [1, 1, 0, 0, 0, 0, 0]]  # columns back in tool order
    path.write_text("Frame\tGrasper\n0\t1\n")
    with pytest.raises(DataError, match=r"v-tool.txt:1: expected the header"):
        read_tool_tsv(path, CHOLEC80_TOOLS)
    _tool_file(path, [[1, 0, 0, 0, 0, 0, 1], [1, 0, 2, 0, 0, 0, 1]])
    with pytest.raises(DataError, match=r"v-tool.txt:3: expected a frame number and 7 values 0 or 1"):
        read_tool_tsv(path, CHOLEC80_TOOLS)


def test_tools_at_takes_the_last_row_at_or_before_each_time() -> None:
    rows = np.array([[1, 0], [0, 1], [1, 1]], np.int8)
    record = VideoRecord(
        "v", Path("v.mp4"), np.zeros(75, np.int64), 25.0, tools=rows, tool_times=np.array([0.0, 1, 2])
    )
    times = np.array([0.0, 0.99, 1.0, 1.5, 2.0, 2.99, 3.0, 7.0])
    expected = []
    for t in times:  # independent: scan the rows
        row = None
        for i, rt in enumerate(record.tool_times):
            if rt <= t + 1e-9:
                row = i
        expected.append(rows[row].tolist() if row is not None and t < 3.0 else [-1, -1])
    assert tools_at(record, times).tolist() == expected
    assert tools_at(VideoRecord("v", Path("v.mp4"), np.zeros(3, np.int64), 1.0), times) is None


def test_cholec80_adapter_reads_tool_annotations_when_present(tmp_path: Path) -> None:
    root = tmp_path / "cholec80"
    for num in (1, 2):
        write_index_video(root / "videos" / f"video{num:02d}.mp4", n_frames=60)
        phase = root / "phase_annotations" / f"video{num:02d}-phase.txt"
        phase.parent.mkdir(parents=True, exist_ok=True)
        phase.write_text("Frame\tPhase\n" + "".join(f"{i}\t{CHOLEC80_PHASES[0]}\n" for i in range(60)))
    _tool_file(root / "tool_annotations" / "video01-tool.txt", [[1, 0, 0, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0]])
    first, second = get_dataset("cholec80", root).videos()
    assert first.tools.tolist()[1] == [0, 0, 1, 0, 0, 0, 0]
    assert first.tool_times.tolist() == [0.0, 1.0]  # frame 25 at 25 fps
    assert second.tools is None  # a video without a tool file has phases only


def test_synthetic_tool_labels_are_what_is_drawn(tmp_path: Path) -> None:
    """A tool is labelled present exactly when removing it from the scene changes the frame."""
    from plstitch_eval.data.synthetic import SyntheticConfig, phase_timeline
    from plstitch_eval.data.synthetic_scene import TOOL_COLUMNS, Scene

    rng = np.random.default_rng([0, 0])
    config = SyntheticConfig(size=48, min_seconds=60.0, max_seconds=60.0)
    phases = phase_timeline(rng, config)
    scene = Scene(rng, 48, phases, 25.0)
    ids = np.arange(0, len(phases), 25)
    labels = scene.tool_presence(ids)
    full = scene._render_content(ids)
    everything = list(scene.tools)
    for kind, column in (
        ("grasper", "Grasper"),
        ("hook", "Hook"),
        ("clipper", "Clipper"),
        ("irrigator", "Irrigator"),
    ):
        scene.tools = [t for t in everything if t[1] != kind]
        drawn = np.abs(scene._render_content(ids) - full).reshape(len(ids), -1).max(1) > 0
        assert (labels[:, TOOL_COLUMNS.index(column)] == drawn).all(), column
    scene.tools = everything
    assert (
        labels[:, TOOL_COLUMNS.index("Bipolar")].sum() == labels[:, TOOL_COLUMNS.index("Scissors")].sum() == 0
    )
    bag = labels[:, TOOL_COLUMNS.index("SpecimenBag")].astype(bool)
    assert bag.any() and not bag[phases[ids] < 4].any()  # the bag appears from packaging on


def test_synthetic_dataset_ships_tool_files_and_old_copies_get_them(tmp_path: Path) -> None:
    root = generate_synthetic(tmp_path / "syn", seed=2, workers=1, **TINY)
    files = sorted((root / "tool_annotations").glob("*-tool.txt"))
    assert len(files) == 3
    kept = files[0].read_text()
    shutil.rmtree(root / "tool_annotations")  # a copy generated before tool labels existed
    assert generate_synthetic(tmp_path / "syn", seed=2, **TINY) == root
    assert files[0].read_text() == kept  # rebuilt from the seed, identical
    record = get_dataset("cholec80", root).videos()[0]
    assert record.tools.shape[1] == 7 and len(record.tools) == int(np.ceil(len(record.labels) / 25))


def test_extraction_stores_tools_beside_phases(tmp_path: Path) -> None:
    from plstitch_eval.extract import ExtractOptions, extract_features
    from plstitch_eval.hub import load_encoder
    from plstitch_eval.store.features import FeatureStore

    root = generate_synthetic(tmp_path / "syn", seed=2, workers=1, **TINY)
    adapter = get_dataset("cholec80", root)
    out = tmp_path / "store"
    extract_features(
        adapter,
        load_encoder("raw-pixels", device="cpu"),
        out,
        ExtractOptions(device="cpu", progress=False, num_workers=0),
    )
    store = FeatureStore(out)
    assert store.manifest["tool_names"] == CHOLEC80_TOOLS
    for record in adapter.videos():
        item = store.read(record.name)
        assert item.tools is not None and item.tools.shape == (len(item.labels), 7)
        assert item.tools.tolist() == tools_at(record, item.frame_times).tolist()
