"""`plstitch temporal` through Typer's runner: temporal context beats the linear probe on ordered procedures,
the results JSON has the linear protocol's keys, seeds, refusals, option defaults, saved probes."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from typer.testing import CliRunner

import plstitch_eval.protocols.temporal as protocol
from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError
from plstitch_eval.probes import load_probe
from plstitch_eval.store.features import FeatureStore, VideoFeatures
from plstitch_eval.temporal.fit import TemporalConfig, video_logits

from .conftest import make_procedure_store

runner = CliRunner()
FAST = ("--epochs", 15)  # the synthetic procedures are learnt in ~15 epochs (val accuracy > 90)
# Measured on make_procedure_store (noise 2.0, seeds 0-1, 15 and 50 epochs): linear Edit 18-24, temporal
# Edit 94-100 (accuracy: linear 59-65, temporal 90-96). A per-frame probe fragments the noisy phases; the
# MS-TCN sees ~1,000 frames of context. Floors well inside those gaps:
EDIT_MARGIN = 40.0
ACCURACY_MARGIN = 10.0


def invoke(*args, code: int = 0):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == code, result.output
    return result


def read(path):
    return json.loads(path.read_text())


def test_temporal_beats_linear_on_edit_with_every_linear_metric(procedure_store, tmp_path):
    store = procedure_store.root
    invoke("linear", "--features", store, "--device", "cpu", "--json", tmp_path / "lin.json")
    out = invoke("temporal", "--features", store, *FAST, "--json", tmp_path / "tcn.json")
    assert "temporal (MS-TCN 4x10x64, epoch" in out.stdout and "accuracy" in out.stdout
    lin, tcn = read(tmp_path / "lin.json"), read(tmp_path / "tcn.json")
    assert tcn["task"] == "temporal" and tcn["schema"] == lin["schema"]
    assert set(tcn) == set(lin) and set(tcn["metrics"]) == set(lin["metrics"])
    assert set(tcn["per_video"]) == set(lin["per_video"]) == set(tcn["predictions"])
    assert tcn["splits"] == lin["splits"]  # the same hold-out by video (seed 0)
    assert tcn["metrics"]["edit"] > lin["metrics"]["edit"] + EDIT_MARGIN
    assert tcn["metrics"]["accuracy"] > lin["metrics"]["accuracy"] + ACCURACY_MARGIN
    proto = tcn["protocol"]
    assert {k: proto[k] for k in ("stages", "layers", "channels", "lr", "causal")} == {
        "stages": 4,
        "layers": 10,
        "channels": 64,
        "lr": 5e-4,
        "causal": False,
    }
    assert proto["epochs"] == 15 and len(proto["val_scores"]) == 15
    assert proto["val_scores"][proto["chosen_epoch"] - 1] == max(proto["val_scores"])
    assert proto["validation"].startswith("held out by video")


def test_same_seed_same_results_and_seeds_give_mean_and_std(tmp_path):
    store = make_procedure_store(tmp_path / "store", n_videos=8, with_val=True).root
    small = ("--stages", 2, "--layers", 4, "--channels", 16, "--epochs", 4)
    invoke("temporal", "--features", store, *small, "--seed", 5, "--json", tmp_path / "a.json")
    invoke("temporal", "--features", store, *small, "--seed", 5, "--json", tmp_path / "b.json")
    a, b = read(tmp_path / "a.json"), read(tmp_path / "b.json")
    assert a["predictions"] == b["predictions"] and a["metrics"] == b["metrics"]
    assert (
        a["protocol"]["val_scores"] == b["protocol"]["val_scores"]
        and a["protocol"]["validation"] == "official"
    )
    out = invoke(
        "temporal", "--features", store, *small, "--seed", 5, "--seeds", 3, "--json", tmp_path / "s.json"
    )
    assert "mean ± std over 3 seeds" in " ".join(out.stdout.split())
    s = read(tmp_path / "s.json")
    assert [run["seed"] for run in s["seeds"]] == [5, 6, 7] == s["protocol"]["seeds"]
    assert s["seeds"][0]["metrics"] == a["metrics"]  # seed 5 again, on the same splits
    assert set(s["metrics_std"]) == set(s["metrics"]) == set(a["metrics"])
    for key in ("accuracy", "edit", "f1@50"):
        values = [run["metrics"][key] for run in s["seeds"]]
        assert s["metrics"][key] == pytest.approx(np.mean(values))
        assert s["metrics_std"][key] == pytest.approx(np.std(values, ddof=1))
    assert s["predictions"] == a["predictions"]


def test_one_class_training_split_is_refused(tmp_path):
    store = make_procedure_store(tmp_path / "store", n_videos=8, with_val=True)
    for video in store.manifest["splits"]["train"]:
        item = store.read(video)
        store.write(VideoFeatures(video, item.features, np.zeros_like(item.labels), item.frame_times))
    out = invoke("temporal", "--features", store.root, "--epochs", 1, code=1)
    assert "only one class ('Preparation')" in out.output and "Traceback" not in out.output


def test_relaxed_block_follows_the_strict_metrics(tmp_path):
    store = make_procedure_store(tmp_path / "store", n_videos=8, with_val=True, dataset="cholec80").root
    small = ("--stages", 2, "--layers", 3, "--channels", 8, "--epochs", 2, "--relaxed")
    invoke("temporal", "--features", store, *small, "--json", tmp_path / "r.json")
    invoke("temporal", "--features", store, *small, "--seeds", 2, "--json", tmp_path / "s.json")
    for name in ("r", "s"):
        keys = list(read(tmp_path / f"{name}.json"))
        assert keys[keys.index("metrics") + 1] == "relaxed"


def test_options_default_to_the_config_and_pass_through(monkeypatch, tmp_path):
    seen = []

    def fake_run(features, config, **options):
        seen.append(config)
        raise ConfigError("stop here")

    monkeypatch.setattr(protocol, "run_temporal", fake_run)
    invoke("temporal", "--features", tmp_path, code=1)
    assert seen[-1] == TemporalConfig()
    tecno = ("--causal", "--stages", 2, "--layers", 9, "--channels", 45, "--lr", 7e-5, "--epochs", 12)
    more = ("--smooth-weight", 0, "--tau", 3, "--select-metric", "edit", "--batch-size", 2, "--threads", 1)
    invoke("temporal", "--features", tmp_path, *tecno, *more, "--device", "cpu", "--dropout", 0.2, code=1)
    assert seen[-1] == TemporalConfig(
        causal=True,
        stages=2,
        layers=9,
        channels=45,
        lr=7e-5,
        epochs=12,
        smooth_weight=0.0,
        tau=3.0,
        select_metric="edit",
        batch_size=2,
        num_threads=1,
        device="cpu",
        dropout=0.2,
    )
    given = {f.name: f.default for f in dataclasses.fields(TemporalConfig)}
    assert given["device"] == "cpu" and given["epochs"] == 50 and given["batch_size"] == 1


def test_saved_probe_reloads_with_identical_outputs(procedure_store, tmp_path):
    store = procedure_store.root
    config = TemporalConfig(stages=2, layers=5, channels=16, epochs=3, causal=True)
    results, fit = protocol.run_temporal(store, config, progress=False)
    folder = protocol.save_temporal_probe(tmp_path / "probe", store, results, fit, config)
    probe = load_probe(folder)
    assert probe.kind == "temporal" and probe.causal is True
    assert probe.settings == json.loads(json.dumps(dataclasses.asdict(config)))
    assert probe.metrics["accuracy"] == pytest.approx(results["metrics"]["accuracy"])
    item = FeatureStore(store).read(results["splits"]["test"][0])
    expected = video_logits(fit.model, item.features).numpy().T
    np.testing.assert_array_equal(probe.logits(item.features), expected)
    # through the CLI: the saved probe predicts what the results JSON recorded
    args = ("--stages", 2, "--layers", 3, "--channels", 8, "--epochs", 2, "--json", tmp_path / "r.json")
    out = invoke("temporal", "--features", store, *args, "--save", tmp_path / "cli-probe")
    assert "probe saved to" in out.output
    saved, recorded = load_probe(tmp_path / "cli-probe"), read(tmp_path / "r.json")
    for video, preds in recorded["predictions"].items():
        assert saved.predict(FeatureStore(store).read(video).features).tolist() == preds
    invoke("temporal", "--features", store, *args, "--save", tmp_path / "cli-probe", code=1)  # not empty
