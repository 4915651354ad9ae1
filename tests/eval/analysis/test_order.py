import itertools

import numpy as np
import pytest
import torch

from plstitch_eval.analysis.order import (
    head_order_tau,
    kendall_tau_of_scores,
    model_order_tau,
    spread_clips,
    video_order_tau,
)
from plstitch_eval.errors import ConfigError, EvaluationError
from plstitch_eval.store.features import FeatureStore, VideoFeatures


def pair_count_tau_b(x: np.ndarray, y: np.ndarray) -> float:
    """Textbook O(n^2) Kendall tau-b: (concordant - discordant) / sqrt((n0 - ties_x) (n0 - ties_y))."""
    conc = disc = ties_x = ties_y = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
        ties_x += dx == 0
        ties_y += dy == 0
        conc += dx * dy > 0
        disc += dx * dy < 0
    n0 = len(x) * (len(x) - 1) / 2
    return (conc - disc) / np.sqrt((n0 - ties_x) * (n0 - ties_y))


def test_kendall_tau_matches_pair_count():
    rng = np.random.default_rng(0)
    for n in (2, 5, 17, 40):
        scores = rng.integers(0, 6, size=n).astype(float)  # ties on purpose
        times = np.sort(rng.integers(0, 30, size=n)).astype(float)
        if np.all(scores == scores[0]) or np.all(times == times[0]):
            continue
        assert kendall_tau_of_scores(scores, times) == pytest.approx(
            pair_count_tau_b(-scores, times), abs=1e-12
        )
    t = np.arange(10.0)
    assert kendall_tau_of_scores(-t, t) == pytest.approx(1.0)  # higher score = earlier: in order
    assert kendall_tau_of_scores(t, t) == pytest.approx(-1.0)
    assert kendall_tau_of_scores(np.ones(10), t) == 0.0
    with pytest.raises(EvaluationError):
        kendall_tau_of_scores(t[:3], t)


def test_spread_clips():
    clips = spread_clips(100, 8, 4)
    assert clips.shape == (4, 8) and clips.min() >= 0 and clips.max() <= 99
    assert np.all(np.diff(clips, axis=1) > 0)
    np.testing.assert_array_equal(clips[0], np.arange(8) * 12.5 // 1)
    assert len({tuple(c) for c in clips}) == 4
    with pytest.raises(EvaluationError):
        spread_clips(5, 8, 4)
    with pytest.raises(ConfigError):
        spread_clips(50, 1, 4)


def test_video_and_head_order_tau_with_known_head():
    times = np.arange(40, dtype=np.float64)
    feats = np.stack([times, np.zeros(40)], axis=1)

    def early_high(x: torch.Tensor) -> torch.Tensor:
        return -x[..., 0]

    np.testing.assert_allclose(video_order_tau(feats, times, early_high, 8, 5), 1.0)
    np.testing.assert_allclose(video_order_tau(feats, times, lambda x: x[..., 0], 8, 5), -1.0)
    res = head_order_tau(
        {"a": (feats, times), "b": (feats[::-1].copy(), times), "c": (feats[:3], times[:3])},
        early_high,
        clip_len=8,
        n_clips=5,
    )
    assert res["per_video"] == pytest.approx({"a": 1.0, "b": -1.0})
    assert res["tau_mean"] == pytest.approx(0.0) and res["tau_std"] == pytest.approx(1.0)
    assert res["skipped"] == ["c"] and res["n_videos"] == 2


def test_model_order_tau_on_run_folder(tmp_path, run_dir):
    from plstitch_eval.hub.ranking_head import load_temporal_head

    rng = np.random.default_rng(1)
    manifest = {
        "dataset": "toy",
        "class_names": ["a"],
        "splits": {"train": ["v1"], "test": ["v2", "v3"]},
        "model": {"spec": "toy", "provenance": {}},
        "fps": 1.0,
    }
    store = FeatureStore.create(tmp_path / "store", manifest)
    drift = rng.normal(size=32)
    for video, n in {"v1": 20, "v2": 30, "v3": 25}.items():
        feats = (np.linspace(0, 3, n)[:, None] * drift + rng.normal(size=(n, 32)) * 0.3).astype(np.float32)
        store.write(VideoFeatures(video, feats, np.zeros(n, np.int64), np.arange(n, dtype=np.float64)))
    res = model_order_tau(run_dir, tmp_path / "store", clip_len=6, n_clips=3)
    assert set(res["per_video"]) == {"v2", "v3"} and res["split"] == "test"
    # independent: score each clip with the head, textbook tau of (-score, time)
    head = load_temporal_head(str(run_dir))
    for video in ("v2", "v3"):
        item = store.read(video)
        n = len(item.features)
        taus = []
        for c in range(3):
            idx = [int((j + c / 3) * n / 6) for j in range(6)]
            with torch.no_grad():
                s = head(torch.as_tensor(item.features[idx])[None])[0].double().numpy()
            taus.append(pair_count_tau_b(-s, item.frame_times[idx]))
        assert res["per_video"][video] == pytest.approx(np.mean(taus), abs=1e-9)
    # negating the head's last layer (what time-reversed training can converge to) flips every tau
    with torch.no_grad():
        head.scorer[-1].weight.neg_()
        head.scorer[-1].bias.neg_()
    videos = {v: (store.read(v).features, store.read(v).frame_times) for v in ("v2", "v3")}
    flipped = head_order_tau(videos, head, clip_len=6, n_clips=3)
    assert flipped["tau_mean"] == pytest.approx(-res["tau_mean"], abs=1e-9)


def test_order_cli(tmp_path, run_dir):
    import json

    from typer.testing import CliRunner

    from plstitch_eval.cli import app

    rng = np.random.default_rng(5)
    manifest = {
        "dataset": "toy",
        "class_names": ["a"],
        "splits": {"train": ["v1", "v2"], "test": ["v3"]},
        "model": {"spec": "toy", "provenance": {}},
        "fps": 1.0,
    }
    store = FeatureStore.create(tmp_path / "store", manifest)
    for video in ("v1", "v2", "v3"):
        feats = rng.normal(size=(16, 32)).astype(np.float32)
        store.write(VideoFeatures(video, feats, np.zeros(16, np.int64), np.arange(16.0)))
    args = [
        "analyze",
        "order",
        "--model",
        str(run_dir),
        "--features",
        str(tmp_path / "store"),
        "--device",
        "cpu",
    ]
    result = CliRunner().invoke(app, [*args, "--clip-len", "4", "--clips", "2"])
    assert result.exit_code == 0, result.output
    assert "Kendall tau" in result.stdout and "R^2" in result.stdout
    result = CliRunner().invoke(app, [*args, "--json", str(tmp_path / "o.json")])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "o.json").read_text())
    assert data["order"]["n_videos"] == 1 and data["order"]["clip_len"] == 8
    assert {"r2", "mae"} <= set(data["time_probe"])


def test_features_of_another_model_are_one_clear_line(tmp_path) -> None:
    """A store whose feature width is not the head's input is refused by name, not a matmul traceback."""
    from plstitch_eval.hub.ranking_head import TemporalHead, save_temporal_head

    head_dir = save_temporal_head(TemporalHead(16, 8, 1, 2, 16, 0.0), tmp_path / "model")
    manifest = {
        "dataset": "toy",
        "class_names": ["a"],
        "splits": {"test": ["v"]},
        "model": {"spec": "toy", "provenance": {}},
        "fps": 1.0,
    }
    store = FeatureStore.create(tmp_path / "store", manifest)
    store.write(VideoFeatures("v", np.zeros((10, 12), np.float32), np.zeros(10, np.int64), np.arange(10.0)))
    with pytest.raises(EvaluationError, match=r"12-d but the temporal head .* takes 16-d"):
        model_order_tau(head_dir, tmp_path / "store")
