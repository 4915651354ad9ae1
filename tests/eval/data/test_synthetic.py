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
    assert first.parent == cache_root() == tmp_path / "cache" and first.name.startswith("synthetic-v3-")
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


# ----------------------------------------------------------------------------- the v3 scene's cues


def _scene(seed: int = 0, seconds: float = 60.0, size: int = 64, fps: float = 25.0):
    from plstitch_eval.data.synthetic import SyntheticConfig, phase_timeline
    from plstitch_eval.data.synthetic_scene import Scene

    rng = np.random.default_rng([seed, 0])
    config = SyntheticConfig(size=size, fps=int(fps), min_seconds=seconds, max_seconds=seconds)
    phases = phase_timeline(rng, config)
    return Scene(rng, size, phases, fps), phases


def test_field_of_view_is_a_circle_with_black_corners():
    scene, phases = _scene()
    frames = scene.render(np.arange(0, len(phases), 25)).astype(np.float32)
    corners = frames[:, [0, 0, -1, -1], [0, -1, 0, -1]]
    assert corners.max() < 12  # noise is masked outside the scope too
    centre = frames[:, 28:36, 28:36]
    assert centre.mean() > 60 and (centre.mean(axis=(1, 2, 3)) > 30).all()


def test_anatomy_changes_only_forward():
    from plstitch_eval.data.synthetic_scene import N_CLIPS, anatomy_state

    for seed in range(5):
        scene, phases = _scene(seed)
        state = scene.state
        for key in ("clips", "cut", "detach", "in_bag", "bag_out"):
            assert (np.diff(state[key].astype(np.float32)) >= 0).all(), key
        assert (np.diff(state["fat"]) <= 0).all()
        assert state["clips"][phases < 2].max() == 0 and state["clips"][phases > 2].min() == N_CLIPS
        assert state["fat"][0] == 1.0 and state["fat"][-1] < 0.2 and state["in_bag"][-1] == 1.0
    # an independent statement of the same schedule for one phase: the clips go on one by one in phase 2
    in_phase = np.linspace(0, 0.999, 50)
    clips = anatomy_state(np.full(50, 2), in_phase)["clips"]
    assert set(clips.tolist()) == {0, 1, 2, 3} and (np.diff(clips) >= 0).all()


def test_burn_marks_accumulate():
    scene, phases = _scene(1)
    ids = np.arange(0, len(phases), 25)
    frames = scene.render(ids).astype(np.float32)
    dark = (frames.sum(-1) < 170) & (scene.fov[0, ..., 0] > 0.99)  # burn colour, inside the scope
    counts = dark.sum(axis=(1, 2))
    first, last = counts[: len(counts) // 6].mean(), counts[len(counts) // 2 :].mean()
    assert last > first + 5


def test_instruments_enter_from_phase_typical_sides_and_phases_1_and_3_share_them():
    from plstitch_eval.data.synthetic_scene import PHASE_TOOLS

    assert [(k, a) for k, a, _ in PHASE_TOOLS[1]] == [(k, a) for k, a, _ in PHASE_TOOLS[3]]
    errors, toolless = [], 0
    for seed in range(6):
        scene, phases = _scene(seed, seconds=90.0)
        in_view = np.zeros(len(phases), bool)
        for phase, kind, base, _tips, present in scene.tools:
            angles = {k: (a, p) for k, a, p in PHASE_TOOLS[phase]}
            seen = np.rad2deg(np.arctan2(*(base - scene.fov_centre)[::-1])) % 360
            assert abs((seen - angles[kind][0] + 180) % 360 - 180) <= 20.5, (phase, kind, seen)
            errors.append(present.mean() - angles[kind][1])
            in_view |= present & (phases == phase)
        toolless += int((~in_view[(phases >= 1) & (phases <= 3)]).sum())
    assert abs(np.mean(errors)) < 0.15  # tools are in view about as often as PHASE_TOOLS says
    assert toolless > 0  # some working-phase frames show no instrument at all


def test_camera_moves_little_between_context_frames():
    scene, phases = _scene(2, seconds=90.0)
    assert np.abs(scene.pan).max() <= 3
    step = int(2.5 * 25)  # the far end of the context range (1.5-2.5 s)
    shift = np.abs(scene.pan[step:] - scene.pan[:-step])
    assert shift.max() <= 2 and shift.mean() < 1  # at most 3 % of the frame, under a pixel on average


def test_raw_pixels_are_far_from_perfect():
    """k-NN on 8x8x3 thumbnails of held-out videos: better than the majority class, far from perfect."""
    import torch
    import torch.nn.functional as F

    def thumbs(v):
        scene, phases = _scene(v, seconds=50.0 + 5 * (v % 5))
        ids = np.arange(0, len(phases), 25)
        frames = torch.from_numpy(scene.render(ids)).permute(0, 3, 1, 2).float() / 255
        return F.interpolate(frames, size=8, mode="bilinear", antialias=True).flatten(1), phases[ids]

    train = [thumbs(v) for v in range(12)]
    test = [thumbs(v) for v in range(12, 18)]
    x_train = F.normalize(torch.cat([f for f, _ in train]), dim=1)
    y_train = torch.from_numpy(np.concatenate([p for _, p in train]))
    x_test = F.normalize(torch.cat([f for f, _ in test]), dim=1)
    y_test = torch.from_numpy(np.concatenate([p for _, p in test]))
    sims, idx = (x_test @ x_train.T).topk(20, dim=1)
    votes = torch.zeros(len(x_test), 7).scatter_add_(1, y_train[idx], (sims / 0.07).exp())
    accuracy = (votes.argmax(1) == y_test).float().mean().item()
    majority = (y_test == torch.bincount(y_train).argmax()).float().mean().item()
    assert majority + 0.1 < accuracy < 0.75
