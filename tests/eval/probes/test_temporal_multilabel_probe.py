"""`plstitch temporal --task triplets --save`: the multi-label MS-TCN saved as a ``temporal`` probe that
says which triplets are present - read back strictly, its probabilities equal to those the run scored (the
results' stored predictions), causal with --causal, its card naming the task; a fraction run refuses --save
in one line. The card's table marks a Brier score as a fraction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.predict.heads import frame_fields
from plstitch_eval.probes import load_probe
from plstitch_eval.probes.card import MetricRow, metrics_table, task_face
from plstitch_eval.store.features import FeatureStore
from tests.eval.tasks.cli import refused, synthetic_store

TINY = {"n_videos": 9, "size": 32, "min_seconds": 6.0, "max_seconds": 10.0, "workers": 1}
SMALL = ["--stages", "2", "--layers", "3", "--channels", "8", "--epochs", "3", "--lr", "0.01"]
runner = CliRunner()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[FeatureStore, dict, Path]:
    tmp = tmp_path_factory.mktemp("t50-probe")
    store = synthetic_store("synthetic-triplets", tmp, **TINY)
    out, folder = tmp / "t.json", tmp / "probes" / "t50"
    args = ["temporal", "-f", str(store.root), "--task", "triplets", *SMALL, "--causal"]
    result = runner.invoke(app, [*args, "--json", str(out), "--save", str(folder)])
    assert result.exit_code == 0, result.output
    assert f"probe saved to {folder}" in result.stderr
    return store, json.loads(out.read_text()), folder


def test_the_saved_probe_gives_the_probabilities_the_run_scored(saved) -> None:
    store, results, folder = saved
    probe = load_probe(folder)
    names = store.manifest["triplet_names"]
    assert probe.kind == "temporal" and probe.is_multilabel and probe.causal
    assert probe.task_name == "triplets" and probe.class_names == names == results["class_names"]
    assert probe.value_columns == [f"triplet_{n}" for n in names]
    assert probe.settings["refine"] == "sigmoid" and probe.settings["stages"] == 2
    proto = results["protocol"]
    assert probe.task["select_metric"] == "mAP_IVT"
    assert probe.task["select_value"] == pytest.approx(proto["val_scores"][proto["chosen_epoch"] - 1])
    assert probe.metrics["mAP_IVT"] == pytest.approx(results["metrics"]["mAP_IVT"])
    for video, stored in results["predictions"].items():
        item = store.read(video)
        got = probe.probabilities(item.features)  # the whole video, as predict runs it
        annotated = (item.triplets >= 0).all(1)
        assert got.shape == (len(item.features), len(names))
        np.testing.assert_allclose(got[annotated], np.asarray(stored), atol=6e-6)  # stored: 6 decimals
    fields = frame_fields(probe, None, None, got[0])
    present = [n for n, p in zip(names, got[0], strict=True) if p > 0.5]
    assert fields["present"] == ";".join(present)


def test_a_causal_probe_gives_frame_t_from_frames_up_to_t(saved) -> None:
    store, results, folder = saved
    probe = load_probe(folder)
    x = store.read(sorted(results["predictions"])[0]).features
    whole = probe.probabilities(x)
    np.testing.assert_allclose(probe.probabilities(x[:5]), whole[:5], atol=1e-6)


def test_card_names_the_triplets_and_a_fraction_run_refuses_save(saved, tmp_path: Path) -> None:
    store, _, folder = saved
    face = task_face(load_probe(folder))
    assert face["what"] == "says which of 100 action triplets are present in each frame"
    assert "validation mAP_IVT = " in face["task"]
    line = refused(
        "temporal", "-f", str(store.root), "--task", "triplets", *SMALL, "--train-fraction", "0.5",
        "--save", str(tmp_path / "x"),
    )  # fmt: skip
    assert "--save" in line and "--train-fraction" in line and not (tmp_path / "x").exists()


def test_a_brier_score_is_marked_as_a_fraction_in_a_percent_table() -> None:
    table = metrics_table([MetricRow("mAP", 61.2), MetricRow("brier", 0.18), MetricRow("brier_C1", 0.2)])
    lines = table.splitlines()
    assert "| mAP | 61.20 |" in lines[2] and "(a fraction, 0 best)" not in lines[2]
    assert lines[3].startswith("| brier (a fraction, 0 best) |")
    assert lines[4].startswith("| brier_C1 (a fraction, 0 best) |")
    assert "(a fraction" not in metrics_table([MetricRow("brier", 1.0)], unit="min")
