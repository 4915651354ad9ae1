"""`plstitch cv --protocol temporal`: every fold trains an MS-TCN on its own training videos only."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import plstitch_eval.protocols as protocols
import plstitch_eval.protocols.temporal as temporal_protocol
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.temporal.fit import TemporalConfig, fit_temporal
from tests.eval.temporal.conftest import make_procedure_store

runner = CliRunner()


def test_each_fold_trains_on_its_own_videos_and_predicts_its_test_videos(tmp_path, monkeypatch):
    store = make_procedure_store(tmp_path / "store", n_videos=8, min_frames=20, max_frames=30)
    seen: list[tuple[set[str], set[str], set[str]]] = []

    def recording_fit(train, val, num_classes, config=None, progress=True, background=()):
        seen.append(({it.video for it in train}, {it.video for it in val}, set()))
        return fit_temporal(train, val, num_classes, config, progress=False, background=background)

    monkeypatch.setattr(temporal_protocol, "fit_temporal", recording_fit)
    config = TemporalConfig(epochs=2, stages=2, layers=3, channels=8)
    results = protocols.run_cv(store.root, folds=4, protocol="temporal", temporal_config=config, seed=1)
    assert len(seen) == len(results["folds"]) == 4
    tested = [set(f["test"]) for f in results["folds"]]
    for (train, val, _), test in zip(seen, tested, strict=True):
        assert not train & test and not val & test and not train & val
        assert train | val | test == set(store.videos())
    assert sorted(v for t in tested for v in t) == sorted(store.videos())  # each video tested once
    assert all(1 <= f["chosen_epoch"] <= 2 for f in results["folds"])
    assert results["protocol"]["inner"] == "temporal" and results["protocol"]["stages"] == 2
    for key, value in results["metrics"].items():  # mean over folds
        assert value == pytest.approx(np.mean([f["metrics"][key] for f in results["folds"]]))


def test_unknown_cv_protocol_names_the_choices(tmp_path):
    store = make_procedure_store(tmp_path / "store", n_videos=4, min_frames=10, max_frames=12)
    with pytest.raises(ConfigError, match="knn, linear, temporal"):
        protocols.run_cv(store.root, folds=2, protocol="tcn")


def test_cv_command_runs_the_temporal_protocol(tmp_path):
    store = make_procedure_store(tmp_path / "store", n_videos=6, min_frames=15, max_frames=20)
    out = tmp_path / "cv.json"
    args = ["cv", "--features", str(store.root), "--protocol", "temporal", "--folds", "3", "--epochs", "2"]
    result = runner.invoke(app, [*args, "--causal", "--device", "cpu", "--json", str(out), "-q"])
    assert result.exit_code == 0, result.output
    saved = json.loads(out.read_text())
    assert saved["protocol"]["inner"] == "temporal" and saved["protocol"]["causal"] is True
    assert saved["protocol"]["epochs"] == 2 and len(saved["folds"]) == 3
    assert set(saved["metrics"]) >= {"accuracy", "edit", "f1@50", "macro_f1_video"}
