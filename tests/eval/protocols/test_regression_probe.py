"""Regression probes (`protocols/regression_probe.py`): `linear` / `temporal --task anticipation|rsd --save`.

A saved probe, loaded back, gives the minutes the protocol scored: its values on each test video equal the
results JSON's predictions (rounded there to 4 decimals; the probe computes in float32: 2e-3 minutes), and
the metrics recomputed from the probe's values equal the results' metrics. The probe refuses to give
classes, a phase probe refuses to give minutes, and its task block names the predict columns.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.probes import ProbeError, load_probe
from plstitch_eval.protocols.regression import fit_validated
from plstitch_eval.protocols.regression_probe import save_regression_probe
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.tasks import TaskSettings
from plstitch_eval.temporal.fit import TemporalConfig
from tests.eval.protocols.regression_stores import rsd_maes, rsd_targets
from tests.eval.protocols.stores import CLASSES, TOOLS, write_store

HORIZON = 0.5
LINEAR = LinearConfig(lrs=(0.01, 0.1), weight_decays=(0.0,), epochs=4, batch_size=64, device="cpu")
TEMPORAL = TemporalConfig(stages=2, layers=3, channels=8, epochs=3, causal=True, device="cpu")
MINUTES = 2e-3  # probe (float32) against the results' 4-decimal predictions


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> FeatureStore:
    return write_store(tmp_path_factory.mktemp("regression-probe") / "store")


def _saved(store: FeatureStore, tmp_path: Path, head: str, task: str, settings: TaskSettings, config):
    results, fitted, data = fit_validated(head, store.root, task, settings, config)
    folder = save_regression_probe(tmp_path / f"{head}-{task}", store.root, results, fitted, data)
    return results, load_probe(folder)


def _probe_values(probe, store: FeatureStore, videos) -> dict[str, np.ndarray]:
    out = {}
    for video in videos:
        item = store.read(video)
        out[video] = probe.values(item.features, item.frame_times)
    return out


@pytest.mark.parametrize(
    ("head", "config", "elapsed"),
    [("linear", LINEAR, False), ("linear", LINEAR, True), ("temporal", TEMPORAL, False)],
)
def test_rsd_probe_gives_the_scored_minutes(store, tmp_path, head, config, elapsed) -> None:
    results, probe = _saved(store, tmp_path, head, "rsd", TaskSettings(elapsed=elapsed), config)
    assert probe.is_regression and probe.task_name == "rsd"
    assert probe.value_columns == ["remaining_min"] and probe.class_names == ["remaining"]
    assert probe.task["elapsed"] is elapsed and probe.causal is True
    values = _probe_values(probe, store, results["predictions"])
    for video, expected in results["predictions"].items():
        assert values[video].shape == (len(expected), 1)
        np.testing.assert_allclose(values[video][:, 0], expected, atol=MINUTES)
        assert (values[video] >= 0).all()  # the task's lower bound, applied by the probe
    preds = np.concatenate([values[v][:, 0] for v in values])
    truth = np.concatenate([rsd_targets(store.read(v).frame_times) for v in values])
    pooled = rsd_maes(preds.tolist(), truth.tolist())["MAE"]
    assert pooled == pytest.approx(results["metrics"]["MAE"], abs=MINUTES)
    assert probe.metrics["MAE"] == pytest.approx(results["metrics"]["MAE"])


def test_anticipation_probe_columns_and_bounds(store, tmp_path) -> None:
    settings = TaskSettings(horizon_min=HORIZON)
    results, probe = _saved(store, tmp_path, "linear", "anticipation", settings, LINEAR)
    assert probe.class_names == [*CLASSES, *TOOLS]
    assert probe.value_columns == [f"next_{name}_min" for name in [*CLASSES, *TOOLS]]
    assert probe.task["horizon_min"] == HORIZON and probe.task["bounds"] == [0.0, HORIZON]
    values = _probe_values(probe, store, results["predictions"])
    for video, expected in results["predictions"].items():
        np.testing.assert_allclose(values[video], np.asarray(expected), atol=MINUTES)
        assert values[video].min() >= 0.0 and values[video].max() <= HORIZON


def test_regression_probe_refuses_classes_and_phase_probe_refuses_minutes(store, tmp_path) -> None:
    _, probe = _saved(store, tmp_path, "linear", "rsd", TaskSettings(), LINEAR)
    item = store.read(store.videos()[0])
    with pytest.raises(ProbeError, match="regression probe .*task rsd.*not classes"):
        probe.probabilities(item.features)
    runner = CliRunner()
    phase_dir = tmp_path / "phases"
    done = runner.invoke(
        app, ["linear", "--features", str(store.root), "--epochs", "2", "--save", str(phase_dir)]
    )
    assert done.exit_code == 0, done.output
    phases = load_probe(phase_dir)
    assert not phases.is_regression and phases.task is None
    with pytest.raises(ProbeError, match="gives no minutes"):
        phases.values(item.features, item.frame_times)


def test_tampered_scale_is_refused(store, tmp_path) -> None:
    _, probe = _saved(store, tmp_path, "linear", "rsd", TaskSettings(), LINEAR)
    record_path = probe.folder / "probe.json"
    record = json.loads(record_path.read_text())
    record["task"] = ["not", "an", "object"]
    record_path.write_text(json.dumps(record))
    with pytest.raises(ProbeError, match="'task' must be a JSON object"):
        load_probe(probe.folder)


def test_cli_saves_a_regression_probe(store, tmp_path) -> None:
    runner = CliRunner()
    target = tmp_path / "probes" / "rsd"
    args = ["--features", str(store.root), "--task", "rsd", "--json", str(tmp_path / "r.json")]
    done = runner.invoke(app, ["linear", *args, "--epochs", "2", "--save", str(target)])
    assert done.exit_code == 0, done.output
    probe = load_probe(target)
    assert probe.kind == "linear" and probe.is_regression
    results = json.loads((tmp_path / "r.json").read_text())
    assert probe.metrics["MAE"] == pytest.approx(results["metrics"]["MAE"])
    again = runner.invoke(app, ["linear", *args[:4], "--epochs", "2", "--save", str(target)])
    assert again.exit_code != 0 and "exists and is not empty" in again.output
    assert "Traceback" not in again.output
    fraction = runner.invoke(
        app, ["linear", *args[:4], "--train-fraction", "0.5", "--save", str(tmp_path / "f")]
    )
    assert fraction.exit_code != 0 and "Traceback" not in fraction.output
    assert not (tmp_path / "f").exists()
    tcn = tmp_path / "probes" / "tcn"
    done = runner.invoke(
        app,
        [
            "temporal",
            *args[:4],
            "--causal",
            "--epochs",
            "2",
            "--stages",
            "2",
            "--layers",
            "2",
            "--save",
            str(tcn),
        ],
    )
    assert done.exit_code == 0, done.output
    assert load_probe(tcn).kind == "temporal" and load_probe(tcn).causal
