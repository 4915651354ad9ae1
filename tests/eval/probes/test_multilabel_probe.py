"""Multi-label probes (`linear --task tools|cvs --save`): the saved head gives the grid's chosen head's
probabilities (checked against sigmoid(standardised x @ W + b) computed here, and against the results'
stored predictions), the task block names labels, columns and thresholds, the load is strict, the card
describes it, and a fraction run refuses --save in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.predict.heads import frame_fields
from plstitch_eval.probes import load_probe
from plstitch_eval.probes.card import task_face
from plstitch_eval.probes.probe import ProbeError
from plstitch_eval.protocols.multilabel import fit_multilabel_linear
from plstitch_eval.protocols.multilabel_probe import save_multilabel_probe
from plstitch_eval.tasks import get_task
from tests.eval.evaluate.test_tool_presence import TOOLS, make_tool_store
from tests.eval.tasks.cli import refused, synthetic_store
from tests.eval.tasks.test_cvs_task import TINY

runner = CliRunner()


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("multilabel-probe")
    store = make_tool_store(tmp / "store")
    config = LinearConfig(epochs=3, balance_classes=True, device="cpu")
    results, fitted = fit_multilabel_linear("tools", store.root, config)
    folder = save_multilabel_probe(tmp / "probe", get_task("tools"), store.root, results, fitted)
    return store, results, fitted, folder


def test_saved_tools_probe_gives_the_chosen_heads_probabilities(saved) -> None:
    store, results, fitted, folder = saved
    probe = load_probe(folder)
    assert probe.is_multilabel and not probe.is_regression and not probe.gives_classes
    assert probe.class_names == TOOLS and probe.value_columns == [f"tool_{t}" for t in TOOLS]
    assert probe.task["labels"] == TOOLS and probe.thresholds.tolist() == [0.5] * len(TOOLS)
    assert probe.task["select_metric"] == "mAP" and probe.label_classes == ["a", "b"]
    best = fitted.best_head
    assert probe.task["select_value"] == pytest.approx(max(v for v in fitted.val_scores if v == v))
    grid = fitted.grid
    mean, std = grid.mean.numpy().astype(np.float64), grid.std.numpy().astype(np.float64)
    weight = grid.weight[:, best].numpy().astype(np.float64)
    bias = grid.bias[best].numpy().astype(np.float64)
    for video, stored in results["predictions"].items():
        item = store.read(video)
        x = item.features
        expected = _sigmoid(((x - mean) / std) @ weight + bias)  # independent of the head's own code
        got = probe.probabilities(x)
        assert got.shape == (len(x), len(TOOLS))
        np.testing.assert_allclose(got, expected, atol=1e-5)
        annotated = (item.tools >= 0).all(1)
        np.testing.assert_allclose(got[annotated], np.asarray(stored), atol=5.1e-5)  # stored: 4 decimals
        assert probe.present(got[0]) == [t for t, p in zip(TOOLS, got[0], strict=True) if p > 0.5]
    with pytest.raises(ProbeError, match="present"):
        probe.predict(x)


def test_a_damaged_task_block_is_refused_in_one_line(saved, tmp_path: Path) -> None:
    *_, folder = saved
    record = json.loads((folder / "probe.json").read_text())
    record["task"]["thresholds"] = [0.5, 1.5, 0.5, 0.5]
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "probe.json").write_text(json.dumps(record))
    (tmp_path / "p" / "probe.safetensors").write_bytes((folder / "probe.safetensors").read_bytes())
    with pytest.raises(ProbeError, match="one threshold in \\(0, 1\\) per label"):
        load_probe(tmp_path / "p")


def test_card_names_task_labels_and_the_metric_it_was_chosen_on(saved) -> None:
    *_, folder = saved
    face = task_face(load_probe(folder))
    assert "tools (multi-label)" in face["task"] and "Grasper, Hook, Clipper, Scissors" in face["task"]
    assert "validation mAP = " in face["task"] and "tool_Grasper" in face["task"]
    assert face["what"] == "says which of 4 tools are present in each frame"


def test_cli_saves_a_cvs_probe_and_refuses_save_with_a_fraction(tmp_path: Path) -> None:
    store = synthetic_store("synthetic-cvs", tmp_path, **TINY)
    names = store.manifest["cvs_names"]
    done = runner.invoke(
        app,
        ["linear", "-f", str(store.root), "--task", "cvs", "--epochs", "2", "--save", str(tmp_path / "cvs")],
    )
    assert done.exit_code == 0, done.output
    probe = load_probe(tmp_path / "cvs")
    assert probe.task_name == "cvs" and probe.class_names == names
    assert probe.value_columns == [f"cvs_{n}" for n in names]
    p = np.linspace(0.2, 0.8, len(names))
    fields = frame_fields(probe, None, None, p)  # predict's row: a column per criterion, then present
    assert list(fields) == [*probe.value_columns, "present"] and fields["present"] == names[-1]
    line = refused(
        "linear",
        "-f",
        str(store.root),
        "--task",
        "cvs",
        "--train-fraction",
        "0.5",
        "--save",
        str(tmp_path / "x"),
    )
    assert "--save" in line and "--train-fraction" in line
    assert not (tmp_path / "x").exists()
