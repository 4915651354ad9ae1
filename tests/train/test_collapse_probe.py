"""The iBOT collapse measures against loops written out, and on a run's checkpoint."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from plstitch_train.monitors.collapse_probe import collapse_measures, mean_pairwise_cosine, probe_checkpoint
from plstitch_train.trainer import train
from tests.train.conftest import tiny_config


def test_mean_pairwise_cosine_matches_a_loop() -> None:
    x = torch.randn(5, 7)
    pairs = [
        torch.dot(x[i], x[j]) / (x[i].norm() * x[j].norm()) for i in range(5) for j in range(5) if i != j
    ]
    assert mean_pairwise_cosine(x) == pytest.approx(float(torch.stack(pairs).mean()), abs=1e-6)
    assert mean_pairwise_cosine(torch.ones(3, 4)) == pytest.approx(1.0)


def test_collapse_measures_separate_a_collapsed_head_from_an_informative_one() -> None:
    n, k = 6, 16
    informative = torch.eye(k)[:n] * 2.0  # each image its own output
    flat = torch.full((n, k), 0.3) + 1e-4 * torch.randn(n, k)  # every output alike
    sharp = collapse_measures(torch.randn(n, 8), torch.randn(n, 4), informative, None, 0.04)
    dull = collapse_measures(torch.ones(n, 8), torch.ones(n, 4), flat, torch.full((1, k), 0.3), 0.04)
    assert sharp["uniform_entropy"] == dull["uniform_entropy"] == pytest.approx(math.log(k))
    assert sharp["teacher_entropy"] < 0.01 and dull["teacher_entropy"] > 0.99 * math.log(k)
    assert dull["cls_pairwise_cosine"] == pytest.approx(1.0) and dull["logit_spread"] < 1e-3
    # the spread is the std over outputs, averaged over images (written out)
    expected = sum(float(row.std()) for row in informative) / n
    assert sharp["logit_spread"] == pytest.approx(expected)


def test_probe_reads_a_runs_checkpoint(video_dir: Path, frame_cache: Path, tmp_path: Path) -> None:
    config = tiny_config(video_dir, frame_cache, max_steps=1, lambda_vid=0.0, lambda_jigsaw=0.0)
    train(config, tmp_path / "run")
    measures = probe_checkpoint(tmp_path / "run", torch.randn(4, 3, 32, 32))
    assert set(measures) == {
        "cls_pairwise_cosine",
        "bottleneck_pairwise_cosine",
        "logit_spread",
        "teacher_entropy",
        "uniform_entropy",
    }
    assert measures["uniform_entropy"] == pytest.approx(math.log(config.ibot_out_dim))
    assert 0 <= measures["teacher_entropy"] <= measures["uniform_entropy"] + 1e-6
