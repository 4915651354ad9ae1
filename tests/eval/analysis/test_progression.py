import json

import numpy as np
import torch
from typer.testing import CliRunner

from plstitch_eval.analysis.progression import (
    bin_curve,
    minmax_progress,
    score_frames,
    window_starts,
)
from plstitch_eval.cli import app
from plstitch_eval.hub.ranking_head import load_temporal_head
from plstitch_eval.store.features import FeatureStore
from tests.eval.analysis.conftest import check_png
from tests.official import (
    TINY,
    reference_temporal_scores,
    serve_from_hf_cache,
    unwrap,
    write_official_checkpoint,
)

runner = CliRunner()


class ContextHead(torch.nn.Module):
    """Score = first feature minus the list mean of the second (depends on the whole list, like attention)."""

    def forward(self, x):
        return x[..., 0] - x[..., 1].mean(dim=-1, keepdim=True)


def test_window_starts_cover_every_frame():
    assert window_starts(10, 4, 3) == [0, 3, 6]
    assert window_starts(11, 4, 3) == [0, 3, 6, 7]
    assert window_starts(5, 0, 1) == [0] and window_starts(5, 8, 1) == [0]


def test_score_frames_window_average_matches_loop():
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(11, 3)).astype(np.float32)
    head = ContextHead()
    whole = score_frames(feats, head)
    np.testing.assert_allclose(whole, feats[:, 0] - feats[:, 1].mean(), rtol=1e-5)
    total, count = np.zeros(11), np.zeros(11)
    for s in [0, 3, 6, 7]:
        w = feats[s : s + 4]
        total[s : s + 4] += w[:, 0] - w[:, 1].mean()
        count[s : s + 4] += 1
    np.testing.assert_allclose(
        score_frames(feats, head, window=4, stride=3, batch_size=2), total / count, rtol=1e-5
    )


def test_minmax_progress_and_bins():
    s = np.array([5.0, 3.0, 4.0, 1.0])
    np.testing.assert_allclose(minmax_progress(s), [0.0, 0.5, 0.25, 1.0])
    np.testing.assert_array_equal(minmax_progress(np.ones(3)), 0)
    values = np.arange(10, dtype=float)
    # straightforward binning: frame i at u = i / 9 goes to bin floor(u * 4) (last edge folded in)
    expected = [np.mean([v for i, v in enumerate(values) if min(int(i / 9 * 4), 3) == b]) for b in range(4)]
    np.testing.assert_allclose(bin_curve(values, 4), expected)
    # fewer frames than bins: empty bins are interpolated between bin centres
    curve = bin_curve(np.array([0.0, 1.0]), 4)  # frames land in bins 0 and 3
    np.testing.assert_allclose(curve, [0.0, 1 / 3, 2 / 3, 1.0])


def test_progression_cli_on_features(tmp_path, run_dir):
    # a store made "with this backbone": random 32-d features for three videos
    rng = np.random.default_rng(1)
    from plstitch_eval.store.features import VideoFeatures

    store = FeatureStore.create(tmp_path / "store", {"dataset": "toy", "class_names": ["a"], "splits": {}})
    lengths = {"v1": 12, "v2": 7, "v3": 30}
    for v, n in lengths.items():
        store.write(
            VideoFeatures(
                v, rng.normal(size=(n, 32)).astype(np.float32), np.zeros(n, int), np.arange(n) * 1.0
            )
        )
    out = tmp_path / "figs"
    args = ["analyze", "progression", "--model", str(run_dir), "--features", str(store.root)]
    args += ["--split", "all", "--bins", "10", "--device", "cpu", "--out", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    check_png(out / "progression.png", 6.0, 4.0)
    data = json.loads((out / "progression.json").read_text())
    assert data["n_bins"] == 10 and set(data["per_video"]) == set(lengths)
    # independent recomputation: whole-video scores, min-max, binned by hand
    head = load_temporal_head(run_dir / "backbone")
    curves = []
    for v, n in lengths.items():
        with torch.no_grad():
            s = head(torch.as_tensor(store.read(v).features)[None])[0].double().numpy()
        p = (s.max() - s) / (s.max() - s.min())
        bins = np.minimum((np.arange(n) / (n - 1) * 10).astype(int), 9)
        sums, counts = np.bincount(bins, p, 10), np.bincount(bins, minlength=10)
        centres = (np.arange(10) + 0.5) / 10
        ok = counts > 0
        curve = np.interp(centres, centres[ok], sums[ok] / counts[ok])
        curves.append(curve)
        np.testing.assert_allclose(data["per_video"][v]["curve"], curve, atol=1e-5)
    np.testing.assert_allclose(data["mean"], np.mean(curves, 0), atol=1e-5)
    np.testing.assert_allclose(data["std"], np.std(curves, 0), atol=1e-5)


def test_progression_cli_on_videos(tmp_path, run_dir, video_root):
    args = [
        "analyze",
        "progression",
        "--model",
        str(run_dir),
        "--dataset",
        "cholec80",
        "--root",
        str(video_root),
    ]
    args += ["--split", "all", "--window", "4", "--stride", "2", "--device", "cpu", "--out", str(tmp_path)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "mean Spearman" in result.stdout
    check_png(tmp_path / "progression.png", 6.0, 4.0)
    data = json.loads((tmp_path / "progression.json").read_text())
    assert set(data["per_video"]) == {"video01", "video02", "video03"}
    assert data["per_video"]["video01"]["n_frames"] >= 8  # 8-10 s at 1 fps
    assert min(data["mean"]) >= 0 and max(data["mean"]) <= 1 and len(data["std"]) == 100


def _reference_curve(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Min-max progress binned on normalised time by hand (empty bins interpolated)."""
    n = len(scores)
    p = (scores.max() - scores) / (scores.max() - scores.min())
    bins = np.minimum((np.arange(n) / (n - 1) * n_bins).astype(int), n_bins - 1)
    sums, counts = np.bincount(bins, p, n_bins), np.bincount(bins, minlength=n_bins)
    centres = (np.arange(n_bins) + 0.5) / n_bins
    ok = counts > 0
    return np.interp(centres, centres[ok], sums[ok] / counts[ok])


def test_progression_from_an_official_checkpoint(tmp_path, monkeypatch):
    """A released-layout .pth (and the registry name that resolves to it) gives the authors' head's curves."""
    checkpoint = write_official_checkpoint(tmp_path / "pl_tiny.pth")
    rng = np.random.default_rng(2)
    from plstitch_eval.store.features import VideoFeatures

    store = FeatureStore.create(tmp_path / "store", {"dataset": "toy", "class_names": ["a"], "splits": {}})
    lengths = {"v1": 9, "v2": 14}
    for v, n in lengths.items():
        feats = rng.normal(size=(n, TINY["dim"])).astype(np.float32)
        store.write(VideoFeatures(v, feats, np.zeros(n, int), np.arange(n) * 1.0))
    serve_from_hf_cache(monkeypatch, tmp_path / "hf", tmp_path / "pl_tiny.pth")
    state = unwrap(checkpoint["temporal_head"])
    for spec in (str(tmp_path / "pl_tiny.pth"), "pl-stitch-lemon"):
        out = tmp_path / spec.replace("/", "_")
        args = ["analyze", "progression", "--model", spec, "--features", str(store.root)]
        args += ["--split", "all", "--bins", "6", "--device", "cpu", "--out", str(out)]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        data = json.loads((out / "progression.json").read_text())
        for v in lengths:
            with torch.no_grad():
                scores = reference_temporal_scores(state, torch.as_tensor(store.read(v).features)[None])[0]
            expected = _reference_curve(scores.double().numpy(), 6)
            np.testing.assert_allclose(data["per_video"][v]["curve"], expected, atol=1e-5)


def test_progression_decodes_videos_with_an_official_checkpoint(tmp_path, video_root):
    """--dataset with a .pth: teacher backbone (heads from the checkpoint's args) and temporal head."""
    write_official_checkpoint(tmp_path / "pl_tiny.pth")
    args = ["analyze", "progression", "--model", str(tmp_path / "pl_tiny.pth"), "--dataset", "cholec80"]
    args += ["--root", str(video_root), "--split", "all", "--device", "cpu", "--out", str(tmp_path / "figs")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "figs" / "progression.json").read_text())
    assert set(data["per_video"]) == {"video01", "video02", "video03"}
    assert data["model"] == str(tmp_path / "pl_tiny.pth")
