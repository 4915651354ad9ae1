"""Tool presence: the multi-label probe against autograd and an independent AP, and `linear --task tools`."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import EvaluationError
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.protocols.tools import (
    MAP,
    average_precisions,
    mean_ap,
    multilabel_grad,
    positive_weights,
    run_tool_linear,
    tool_frames,
    train_multilabel_grid,
)
from plstitch_eval.store.features import FeatureStore, VideoFeatures

TOOLS = ["Grasper", "Hook", "Clipper", "Scissors"]


def reference_ap(scores: np.ndarray, targets: np.ndarray) -> float:
    """AP as the mean of the precision at the rank of each positive (distinct scores), in %."""
    order = np.argsort(-scores, kind="stable")
    hits = targets[order].astype(bool)
    precision_at = np.cumsum(hits) / np.arange(1, len(hits) + 1)
    return float(precision_at[hits].mean() * 100)


def test_average_precision_matches_reference_and_skips_absent_tools() -> None:
    rng = np.random.default_rng(0)
    targets = (rng.random((200, 3)) < [0.3, 0.05, 0.0]).astype(np.int8)
    scores = rng.random((200, 3)) + targets * 0.4
    aps = average_precisions(scores, targets)
    for j in range(2):
        assert aps[j] == pytest.approx(reference_ap(scores[:, j], targets[:, j]), abs=1e-9)
    assert aps[2] is None  # no positive frame: undefined, left out of the mean
    assert mean_ap(aps) == pytest.approx((aps[0] + aps[1]) / 2)


def test_grad_equals_autograd_of_balanced_bce() -> None:
    torch.manual_seed(1)
    logits = torch.randn(32, 3, 4, requires_grad=True)  # [N, heads, K]
    targets = (torch.rand(32, 4) < 0.3).float()
    pos_weight = torch.tensor(positive_weights(targets.numpy()), dtype=torch.float32)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    loss = sum(loss_fn(logits[:, h], targets) for h in range(3))
    loss.backward()
    assert torch.allclose(multilabel_grad(logits.detach(), targets, pos_weight), logits.grad, atol=1e-7)


def test_positive_weights() -> None:
    targets = np.array([[1, 0, 1], [0, 0, 1], [0, 0, 1], [0, 0, 1]])
    assert positive_weights(targets).tolist() == [
        3.0,
        1.0,
        1.0,
    ]  # 3 negatives per positive; none; no negative


def test_grid_head_equals_a_single_probe_trained_with_autograd() -> None:
    """One grid head = a linear map + BCEWithLogits(pos_weight) + SGD momentum 0.9 (coupled wd), cosine."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(70, 5)).astype(np.float32)
    y = (x[:, :3] + 0.3 * rng.normal(size=(70, 3)) > 0.4).astype(np.int8)
    config = LinearConfig(lrs=(0.05,), weight_decays=(1e-3,), epochs=3, batch_size=16, balance_classes=True)
    grid = train_multilabel_grid(x, y, config)

    gen = torch.Generator().manual_seed(config.seed)
    w = (torch.randn(5, 1, 3, generator=gen) * 0.01)[:, 0].clone().requires_grad_(True)
    b = torch.zeros(3, requires_grad=True)
    xs = torch.from_numpy(x)
    xs = (xs - xs.mean(0)) / xs.std(0, unbiased=False)
    ys = torch.from_numpy(y).float()
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(positive_weights(y), dtype=torch.float32))
    bufs = [torch.zeros_like(w), torch.zeros_like(b)]
    total, step = 3 * math.ceil(70 / 16), 0
    for _ in range(3):
        order = torch.randperm(70, generator=gen)
        for start in range(0, 70, 16):
            idx = order[start : start + 16]
            w.grad = b.grad = None
            loss_fn(xs[idx] @ w + b, ys[idx]).backward()
            lr = 0.05 * 0.5 * (1 + math.cos(math.pi * step / total))
            with torch.no_grad():
                bufs[0].mul_(0.9).add_(w.grad + 1e-3 * w)
                bufs[1].mul_(0.9).add_(b.grad)
                w -= lr * bufs[0]
                b -= lr * bufs[1]
            step += 1
    assert torch.allclose(grid.weight[:, 0], w.detach(), atol=1e-5)
    assert torch.allclose(grid.bias[0], b.detach(), atol=1e-5)


def make_tool_store(root: Path, n_videos: int = 9, tools: bool = True) -> FeatureStore:
    """Videos whose features carry the tools (+ noise); the last three are the test split."""
    rng = np.random.default_rng(0)
    names = [f"video{i:02d}" for i in range(n_videos)]
    manifest = {
        "dataset": "cholec80",
        "class_names": ["a", "b"],
        "tool_names": TOOLS if tools else [],
        "splits": {"train": names[:-3], "test": names[-3:]},
        "model": {"spec": "tiny-test-encoder", "provenance": {"sha256": "0" * 64}},
        "fps": 1.0,
    }
    store = FeatureStore.create(root, manifest)
    for name in names:
        n = 40
        present = (rng.random((n, len(TOOLS))) < [0.6, 0.3, 0.1, 0.0]).astype(np.int8)
        present[-2:] = -1  # past the last annotated row
        feats = np.concatenate([present.clip(0) * 2.0, np.zeros((n, 4))], 1) + rng.normal(size=(n, 8))
        item = VideoFeatures(
            name,
            feats.astype(np.float32),
            np.zeros(n, np.int64),
            np.arange(n, dtype=np.float64),
            present if tools else None,
        )
        store.write(item)
    return store


def test_store_keeps_tool_labels(tmp_path: Path) -> None:
    store = make_tool_store(tmp_path / "s")
    item = store.read("video00")
    assert item.tools is not None and item.tools.dtype == np.int8 and item.tools.shape == (40, 4)
    assert store.check("video00") is None
    x, y = tool_frames([item])
    assert len(x) == len(y) == 38  # rows with a -1 are left out


def test_run_tool_linear_scores_informative_features(tmp_path: Path) -> None:
    store = make_tool_store(tmp_path / "s")
    results = run_tool_linear(store.root, LinearConfig(epochs=10, balance_classes=True, device="cpu"))
    metrics = results["metrics"]
    assert results["task"] == "linear-tools" and results["class_names"] == TOOLS
    assert metrics["AP_Scissors"] is None and results["protocol"]["tools_without_positives"] == ["Scissors"]
    assert metrics["AP_Grasper"] > 85 and metrics[MAP] > 60  # the features carry the tools
    defined = [metrics[f"AP_{t}"] for t in TOOLS if metrics[f"AP_{t}"] is not None]
    assert metrics[MAP] == pytest.approx(np.mean(defined))
    assert results["protocol"]["validation"].startswith("held out by video")
    assert set(results["predictions"]) == set(store.splits()["test"])


def test_tool_task_without_tool_labels_is_one_clear_error(tmp_path: Path) -> None:
    store = make_tool_store(tmp_path / "s", tools=False)
    with pytest.raises(EvaluationError, match="records no tool names"):
        run_tool_linear(store.root)


def test_cli_linear_task_tools(tmp_path: Path) -> None:
    store = make_tool_store(tmp_path / "s")
    out = tmp_path / "r.json"
    runner = CliRunner()
    result = runner.invoke(app, ["linear", "-f", str(store.root), "--task", "tools", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "mAP" in result.output and "AP_Grasper" in result.output
    assert json.loads(out.read_text())["headline_metrics"] == [MAP]
    saved = runner.invoke(
        app, ["linear", "-f", str(store.root), "--task", "tools", "--save", str(tmp_path / "p")]
    )  # the chosen head is kept as a multi-label probe (tests/eval/probes/test_multilabel_probe.py)
    assert saved.exit_code == 0 and (tmp_path / "p" / "probe.json").is_file(), saved.output
    unknown = runner.invoke(app, ["linear", "-f", str(store.root), "--task", "instruments"])
    assert unknown.exit_code != 0 and "phases, tools" in unknown.output
