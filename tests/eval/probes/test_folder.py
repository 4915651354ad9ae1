"""Probe folders (`probes.folder`): save / load round trips, strict loads, overwrite rules, CLI --save."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import PlstitchError
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.linear_grid import LinearConfig
from plstitch_eval.probes import (
    PROBE_JSON,
    PROBE_SCHEMA,
    PROBE_WEIGHTS,
    LinearProbeHead,
    ProbeError,
    load_probe,
    save_linear_probe,
    save_probe,
)
from plstitch_eval.protocols import fit_linear_protocol, load_videos
from plstitch_eval.store.features import FeatureStore
from tests.eval.evaluate.conftest import CLASS_NAMES, make_store
from tests.eval.probes.conftest import DIM, MANIFEST, PREPROCESSING, one_line_error, random_head, save_random

FAST = LinearConfig(lrs=(0.01, 0.1), weight_decays=(0.0, 1e-3), epochs=5, batch_size=64, device="cpu")
runner = CliRunner()


def test_linear_probe_reloads_to_identical_logits_and_the_results_predictions(tmp_path):
    store = make_store(tmp_path / "store")
    results, fitted = fit_linear_protocol(store.root, FAST)
    folder = save_linear_probe(tmp_path / "probe", store.root, results, fitted)
    probe = load_probe(folder)

    assert sorted(p.name for p in folder.iterdir()) == [PROBE_JSON, PROBE_WEIGHTS]  # no pickle, no temp files
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    assert probe.kind == "linear" and probe.causal is True and probe.class_names == CLASS_NAMES
    assert probe.encoder == {"spec": "tiny-test-encoder", "weights_sha256": "0" * 64, "feature_dim": 16}
    assert probe.fps == 1.0 and probe.dataset == "gtea" and probe.metrics == results["metrics"]
    assert probe.settings["chosen_lr"] == results["protocol"]["chosen_lr"]
    assert probe.source["store"] == str(store.root.resolve())
    assert not probe.head.training
    in_memory = LinearProbeHead.from_result(fitted)
    for item in load_videos(store, results["splits"]["test"]):
        logits = probe.logits(item.features)
        assert logits.shape == (len(item.features), len(CLASS_NAMES))
        assert np.array_equal(logits, fitted.grid.logits(item.features, head=fitted.best_head))
        assert np.array_equal(logits, in_memory(torch.from_numpy(item.features)).detach().numpy())
        assert probe.predict(item.features).tolist() == results["predictions"][item.video]
        probs = probe.probabilities(item.features)
        np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
        assert np.array_equal(probs.argmax(-1), probe.predict(item.features))


def test_weights_file_is_safetensors_with_the_recorded_sha(tmp_path):
    folder = save_random(tmp_path / "probe")
    record = json.loads((folder / PROBE_JSON).read_text())
    raw = (folder / PROBE_WEIGHTS).read_bytes()
    assert raw[8:9] == b"{" and not raw.startswith(b"\x80")  # a safetensors JSON header, not a pickle
    assert record["weights"]["sha256"] == sha256_file(folder / PROBE_WEIGHTS)
    assert record["schema"] == PROBE_SCHEMA and record["preprocessing"] == PREPROCESSING
    assert record["encoder"] == {
        "spec": "hf-hub:org/encoder-a",
        "weights_sha256": "ab" * 32,
        "feature_dim": DIM,
    }
    assert record["source"]["created"] == MANIFEST["created"]
    assert set(load_file(folder / PROBE_WEIGHTS)) == {"mean", "std", "weight", "bias"}


def _rewrite_weights(folder: Path, change) -> None:
    """Edit the weights and record the new file's sha256, so only the strict load can object."""
    state = load_file(folder / PROBE_WEIGHTS)
    change(state)
    save_file(state, folder / PROBE_WEIGHTS)
    record = json.loads((folder / PROBE_JSON).read_text())
    record["weights"]["sha256"] = sha256_file(folder / PROBE_WEIGHTS)
    (folder / PROBE_JSON).write_text(json.dumps(record))


def _edit_json(folder: Path, change) -> None:
    record = json.loads((folder / PROBE_JSON).read_text())
    change(record)
    (folder / PROBE_JSON).write_text(json.dumps(record))


def _tamper(folder: Path) -> None:
    raw = bytearray((folder / PROBE_WEIGHTS).read_bytes())
    raw[-1] ^= 0xFF
    (folder / PROBE_WEIGHTS).write_bytes(bytes(raw))


BREAKAGES = {
    "missing key": (lambda f: _rewrite_weights(f, lambda s: s.pop("bias")), "missing bias"),
    "unexpected key": (
        lambda f: _rewrite_weights(f, lambda s: s.update(extra=torch.zeros(1))),
        "unexpected extra",
    ),
    "wrong shape": (
        lambda f: _rewrite_weights(f, lambda s: s.update(weight=torch.zeros(DIM, 5))),
        f"wrong shape weight [{DIM}, 5] != [{DIM}, 4]",
    ),
    "tampered weights": (_tamper, "weights were changed after saving"),
    "no weights": (lambda f: (f / PROBE_WEIGHTS).unlink(), f"{PROBE_WEIGHTS} is missing"),
    "bad json": (lambda f: (f / PROBE_JSON).write_text('{"schema": '), "not valid JSON (line 1"),
    "json array": (lambda f: (f / PROBE_JSON).write_text("[]"), "not an object"),
    "unknown kind": (
        lambda f: _edit_json(f, lambda r: r.update(kind="quantum")),
        "kind 'quantum' is unknown",
    ),
    "other schema": (lambda f: _edit_json(f, lambda r: r.update(schema="plstitch.probe/v9")), "expected"),
    "no class names": (lambda f: _edit_json(f, lambda r: r.pop("class_names")), "'class_names' must be"),
    "class count": (
        lambda f: _edit_json(f, lambda r: r.update(class_names=["a", "b"])),
        "wrong shape",
    ),
    "bad feature dim": (
        lambda f: _edit_json(f, lambda r: r["encoder"].update(feature_dim="6")),
        "encoder.feature_dim",
    ),
}


@pytest.mark.parametrize("name", BREAKAGES)
def test_broken_probe_folders_are_refused_in_one_line(tmp_path, name):
    folder = save_random(tmp_path / "probe")
    breakage, expected = BREAKAGES[name]
    breakage(folder)
    with pytest.raises(PlstitchError) as exc:
        load_probe(folder)
    message = one_line_error(exc)
    assert expected in message and str(folder) in message


def test_a_folder_without_probe_json_is_no_probe(tmp_path):
    with pytest.raises(ProbeError) as exc:
        load_probe(tmp_path)
    assert f"{tmp_path} is not a probe folder" in one_line_error(exc)


def test_save_refuses_to_overwrite_unless_asked(tmp_path):
    folder = save_random(tmp_path / "probe")
    first = (folder / PROBE_JSON).read_text()
    with pytest.raises(ProbeError) as exc:
        save_random(folder)
    assert "--overwrite" in one_line_error(exc)
    assert (folder / PROBE_JSON).read_text() == first
    save_probe(folder, "linear", random_head(seed=1), MANIFEST, CLASS_NAMES, {}, {}, overwrite=True)
    assert not torch.equal(load_file(folder / PROBE_WEIGHTS)["weight"], random_head(seed=0).weight)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe"]  # the old folder is gone, no temp left

    other = tmp_path / "results"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(ProbeError) as exc:
        save_random(other, overwrite=True)
    assert "only replaces a probe folder" in one_line_error(exc) and (other / "keep.txt").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ProbeError, match="not a folder"):
        save_random(tmp_path / "file", overwrite=True)
    (tmp_path / "empty").mkdir()
    assert load_probe(save_random(tmp_path / "empty")).kind == "linear"


def test_save_refuses_a_head_that_does_not_fit_the_store(tmp_path):
    with pytest.raises(ProbeError) as exc:
        save_probe(tmp_path / "p", "linear", random_head(dim=DIM + 2), MANIFEST, CLASS_NAMES, {}, {})
    assert "store manifest says 6" in one_line_error(exc)
    with pytest.raises(ProbeError) as exc:
        save_probe(tmp_path / "p", "linear", random_head(), MANIFEST, CLASS_NAMES[:3], {}, {})
    assert "wrong shape" in one_line_error(exc)
    with pytest.raises(ProbeError, match="unknown"):
        save_probe(tmp_path / "p", "nope", random_head(), MANIFEST, CLASS_NAMES, {}, {})
    assert not (tmp_path / "p").exists()


def test_cli_linear_save_writes_the_probe_and_refuses_to_overwrite(tmp_path):
    store = make_store(tmp_path / "store").root
    folder, results_path = tmp_path / "probe", tmp_path / "lin.json"
    args = ["linear", "--features", store, "--lr", 0.1, "--epochs", 3, "--device", "cpu", "--save", folder]
    result = runner.invoke(app, [str(a) for a in [*args, "--json", results_path]])
    assert result.exit_code == 0, result.output
    assert f"probe saved to {folder}" in result.stderr
    results = json.loads(results_path.read_text())
    probe = load_probe(folder)
    assert probe.metrics == results["metrics"] and probe.settings == results["protocol"]
    for item in load_videos(FeatureStore(store), results["splits"]["test"]):
        assert probe.predict(item.features).tolist() == results["predictions"][item.video]

    again = runner.invoke(app, [str(a) for a in args])
    assert again.exit_code != 0 and "--overwrite" in again.stderr and "accuracy" not in again.stdout
    forced = runner.invoke(app, [str(a) for a in [*args, "--overwrite"]])
    assert forced.exit_code == 0, forced.output
