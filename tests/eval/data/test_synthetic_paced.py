"""synthetic-paced: `synthetic`'s cases with each case's length in view (docs/synthetic.md)."""

import hashlib
import json

import numpy as np
import pytest

from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.synthetic import (
    PARAMS_FILE,
    TOOL_DIR,
    VERSION,
    SyntheticConfig,
    case_pace,
    generate_synthetic,
    phase_timeline,
)
from plstitch_eval.data.synthetic_scene import Scene
from plstitch_eval.data.video import read_frames

TINY = {"n_videos": 6, "size": 32, "min_seconds": 2.0, "max_seconds": 12.0, "workers": 1}


def test_unpaced_folder_name_and_params_are_v3s():
    """Users' caches of `synthetic` stay valid: an unpaced config hashes as before the option existed."""
    config = SyntheticConfig()
    before = {"version": VERSION, "n_videos": 24, "size": 64, "seed": 0, "fps": 25}
    before |= {"min_seconds": 40.0, "max_seconds": 90.0}
    expected = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]
    assert config.params() == before and config.digest() == expected
    paced = SyntheticConfig(paced=True)
    assert paced.params() == before | {"paced": True} and paced.digest() != expected


def test_pace_is_the_length_between_the_bounds():
    config = SyntheticConfig(fps=10, min_seconds=40.0, max_seconds=90.0)
    for seconds in (40.0, 52.5, 65.0, 90.0):
        assert case_pace(config, int(seconds * 10)) == pytest.approx((seconds - 40.0) / 50.0)
    assert case_pace(SyntheticConfig(min_seconds=5.0, max_seconds=5.0), 125) == 0.5


def _twins(v: int, pace: float | None):
    config = SyntheticConfig(size=32, fps=5, min_seconds=8.0, max_seconds=20.0)
    rng = np.random.default_rng([0, v])
    phases = phase_timeline(rng, config)
    return Scene(rng, 32, phases, 5.0, pace=pace), phases


@pytest.mark.parametrize("v", [0, 5])
def test_a_paced_case_is_its_unpaced_twin_but_for_the_cue(v):
    plain, phases = _twins(v, None)
    paced, paced_phases = _twins(v, 0.7)
    np.testing.assert_array_equal(phases, paced_phases)
    ids = np.arange(len(phases))
    np.testing.assert_array_equal(plain.tool_presence(ids), paced.tool_presence(ids))
    np.testing.assert_array_equal(plain.noise_bank, paced.noise_bank)  # drawn last: the stream was kept
    np.testing.assert_array_equal(plain.pan, paced.pan)
    assert not np.array_equal(plain.liver_colour, paced.liver_colour)
    assert not np.array_equal(plain.render(ids[:3]), paced.render(ids[:3]))


def test_the_cue_rises_with_the_pace():
    scenes = [_twins(3, pace)[0] for pace in (0.0, 0.25, 0.5, 1.0)]
    for attribute in ("liver_colour", "fat_colour", "gb_colour", "gb_axes"):
        values = np.array([getattr(s, attribute) for s in scenes])
        assert np.all(np.diff(values, axis=0) > 0), attribute
    assert all(np.array_equal(s.gain, np.ones(3)) for s in scenes)
    # a longer case's liver reaches further down: more of the frame's top rows are liver (darker than tissue)
    liver_rows = [s.liver.mean() for s in scenes]
    assert np.all(np.diff(liver_rows) > 0)


def test_paced_dataset_has_the_unpaced_labels_and_shows_length(tmp_path):
    plain = generate_synthetic(tmp_path / "plain", **TINY)
    ds = get_dataset("synthetic-paced", tmp_path / "paced", **TINY)
    paced = tmp_path / "paced"
    assert json.loads((paced / PARAMS_FILE).read_text())["paced"] is True
    assert "paced" not in json.loads((plain / PARAMS_FILE).read_text())
    for sub in ("phase_annotations", TOOL_DIR):
        for path in sorted((plain / sub).iterdir()):
            assert (paced / sub / path.name).read_bytes() == path.read_bytes()
    assert ds.name == "synthetic-paced" and ds.splits()["test"] == ["video05", "video06"]
    # independent of the generator's code: decode each video's first frame and read its length from its
    # annotation; the liver (the frame's top rows, always liver) is redder the longer the case
    lengths, liver = [], []
    for video in sorted((paced / "videos").glob("*.mp4")):
        first = next(iter(read_frames(video))).image.astype(np.float64)
        liver.append(first[2:6, 12:20, 0].mean())
        rows = (paced / "phase_annotations" / f"{video.stem}-phase.txt").read_text().splitlines()
        lengths.append(len(rows) - 1)
    assert np.corrcoef(lengths, liver)[0, 1] > 0.8, (lengths, liver)
    assert liver[int(np.argmax(lengths))] > liver[int(np.argmin(lengths))] + 10


def test_a_params_file_with_paced_false_is_the_unpaced_set(tmp_path):
    root = generate_synthetic(tmp_path / "set", **TINY)
    params = json.loads((root / PARAMS_FILE).read_text())
    (root / PARAMS_FILE).write_text(json.dumps(params | {"paced": False}))
    assert generate_synthetic(root, **TINY) == root
