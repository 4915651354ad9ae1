import os

import numpy as np
import pytest

from plstitch_eval.data.datasets import decode, get_dataset, labels_at
from plstitch_eval.data.synthetic import PHASES, cache_root, generate_synthetic
from plstitch_eval.data.video import probe, read_frames
from plstitch_eval.errors import ConfigError

TINY = {"n_videos": 3, "size": 32, "min_seconds": 3.0, "max_seconds": 5.0}


def _decoded(root):
    return [np.stack([f.image for f in read_frames(p)]) for p in sorted((root / "videos").glob("*.mp4"))]


def test_same_seed_same_files_and_frames(tmp_path):
    a = generate_synthetic(tmp_path / "a", seed=3, workers=2, **TINY)
    b = generate_synthetic(tmp_path / "b", seed=3, workers=1, **TINY)  # a parallel and a serial run
    names = sorted(p.name for p in (a / "phase_annotations").iterdir())
    assert names == ["video01-phase.txt", "video02-phase.txt", "video03-phase.txt"]
    for name in names:
        assert (a / "phase_annotations" / name).read_bytes() == (b / "phase_annotations" / name).read_bytes()
    for video in (a / "videos").iterdir():
        assert video.read_bytes() == (b / "videos" / video.name).read_bytes()
    for frames_a, frames_b in zip(_decoded(a), _decoded(b), strict=True):
        np.testing.assert_array_equal(frames_a, frames_b)
    c = generate_synthetic(tmp_path / "c", seed=4, workers=1, **TINY)
    assert (c / "phase_annotations" / names[0]).read_bytes() != (
        a / "phase_annotations" / names[0]
    ).read_bytes()
    with pytest.raises(ConfigError, match="other parameters"):
        generate_synthetic(tmp_path / "a", seed=5, **TINY)


def test_cached_in_plstitch_cache_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PLSTITCH_CACHE", str(tmp_path / "cache"))
    first = generate_synthetic(seed=1, workers=1, **TINY)
    assert first.parent == cache_root() == tmp_path / "cache" and first.name.startswith("synthetic-v2-")
    stamp = os.stat(first / "videos" / "video01.mp4").st_mtime_ns
    assert generate_synthetic(seed=1, **TINY) == first
    assert os.stat(first / "videos" / "video01.mp4").st_mtime_ns == stamp
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [first.name]  # no temp folder left behind
    monkeypatch.delenv("PLSTITCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "plstitch"


def test_synthetic_adapter_reads_through_cholec80_code(tmp_path):
    ds = get_dataset("synthetic", tmp_path / "syn", seed=2, workers=1, **TINY)
    assert ds.class_names == PHASES and ds.native_fps == 25 and ds.eval_fps == 1
    assert ds.splits() == {"train": ["video01", "video02"], "val": [], "test": ["video03"]}
    for record in ds.videos():
        info = probe(record.source)
        assert (info.fps, info.width, info.height) == (25.0, 32, 32)
        assert len(record.labels) == info.n_frames and 3 * 25 <= info.n_frames <= 5 * 25
        assert np.all(np.diff(record.labels) >= 0) and set(record.labels.tolist()) == set(range(7))
        frames = list(decode(record, fps=ds.eval_fps))
        labels, dropped = labels_at(record, [f.time for f in frames])
        assert dropped == 0 and len(labels) == len(frames) == int(np.ceil(info.n_frames / 25))
    default = get_dataset(
        "synthetic", tmp_path / "syn24", n_videos=24, size=16, min_seconds=0.2, max_seconds=0.2, workers=1
    )
    assert [len(default.splits(s)["train"]) for s in ("train-test", "train-val-test")] == [16, 12]
    assert len(default.splits("train-val-test")["val"]) == 4 and len(default.splits()["test"]) == 8
