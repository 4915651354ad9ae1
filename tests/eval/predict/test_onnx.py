"""ONNX export (`predict.onnx`): a probe and its encoder as onnxruntime graphs give the torch predictions
(probabilities within 1e-4, the same phase on every sampled frame of the test videos), offline and online; the
graph alone carries what it needs; refusals are one line. Skipped without the `onnx` extra."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

ort = pytest.importorskip("onnxruntime", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")
onnx = pytest.importorskip("onnx", reason="the onnx extra (pip install 'plstitch[onnx]') is missing")

from plstitch_eval.hub.safe_load import sha256_file  # noqa: E402
from plstitch_eval.predict.onnx import HEAD, ONNX_JSON, RECOGNIZER  # noqa: E402
from plstitch_eval.probes import load_probe  # noqa: E402
from plstitch_eval.store.features import FeatureStore  # noqa: E402
from tests.eval.hub.conftest import hf_cache  # noqa: E402, F401 (a fixture: an offline cache as HF_HUB_CACHE)
from tests.eval.predict.conftest import CPU, invoke, one_error_line, read_csv  # noqa: E402
from tests.eval.predict.test_online import _temporal_probe  # noqa: E402

TEST_VIDEOS = ("video05", "video06")  # the synthetic test split (the last third of six)


@pytest.fixture(scope="module")
def exported(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("onnx") / "export"
    result = invoke("export-onnx", data["probe"], "--out", out)
    assert result.exit_code == 0, result.output
    return out


def _predict(data, probe, out, *extra):
    videos = [data["root"] / "videos" / f"{name}.mp4" for name in TEST_VIDEOS]
    result = invoke("predict", "--probe", probe, *videos, "--out", out, "--no-progression", *CPU, *extra)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), {name: read_csv(out / f"{name}.csv")[1] for name in TEST_VIDEOS}


def _check_parity(torch_rows, onnx_rows, class_names) -> None:
    assert set(torch_rows) == set(onnx_rows)
    for name in torch_rows:
        assert len(torch_rows[name]) == len(onnx_rows[name]) > 0
        for a, b in zip(torch_rows[name], onnx_rows[name], strict=True):
            assert a["time_s"] == b["time_s"] and a["predicted"] == b["predicted"]
            p, q = (np.array([float(row[c]) for c in class_names]) for row in (a, b))
            assert np.abs(p - q).max() < 1e-4


def test_onnx_predictions_equal_torch_on_the_test_videos(data, exported, tmp_path):
    class_names = load_probe(data["probe"]).class_names
    torch_summary, torch_rows = _predict(data, data["probe"], tmp_path / "torch")
    onnx_summary, onnx_rows = _predict(data, exported, tmp_path / "onnx", "--runtime", "onnx")
    _check_parity(torch_rows, onnx_rows, class_names)
    assert torch_summary["runtime"] == "torch" and onnx_summary["runtime"] == "onnxruntime"


def test_the_recognizer_graph_alone_gives_features_and_probabilities(data, exported):
    """A deployment without plstitch: prepared uint8 frames in, the store's features and the probe's
    probabilities out, for any batch size; the graph's metadata says how to feed it."""
    from plstitch_eval.predict import PredictOptions, load_probe_encoder
    from plstitch_eval.preprocess import prepare_frame

    probe = load_probe(data["probe"])
    model = load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0, progression=False))
    session = ort.InferenceSession(str(exported / RECOGNIZER), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    images = [rng.integers(0, 256, (80, 96, 3), dtype=np.uint8) for _ in range(5)]
    frames = np.stack([prepare_frame(image, model.plan).numpy() for image in images])
    for batch in (1, 5):
        features, probabilities = session.run(None, {"frames": frames[:batch]})
        expected = model.encode(torch.from_numpy(frames[:batch])).numpy()
        assert np.abs(features - expected).max() < 1e-4
        assert np.abs(probabilities - probe.probabilities(expected)).max() < 1e-4
    meta = {p.key: p.value for p in onnx.load(str(exported / RECOGNIZER)).metadata_props}
    record = json.loads(meta["plstitch"])
    written = json.loads((exported / ONNX_JSON).read_text())
    assert set(written.pop("sha256")) == {RECOGNIZER, HEAD}  # the graphs' digests: not in their own bytes
    assert record == written and record["probe_sha256"] == sha256_file(exported / "probe.safetensors")
    assert record["class_names"] == probe.class_names and record["fps"] == probe.fps
    assert record["plan"]["crop"] == list(model.plan.crop)


def test_a_causal_temporal_probe_online_equals_torch(data, tmp_path):
    probe = _temporal_probe(data, tmp_path / "tcn", causal=True)
    out = tmp_path / "tcn-onnx"
    assert invoke("export-onnx", probe, "--out", out).exit_code == 0
    assert {p.name for p in out.iterdir()} >= {RECOGNIZER, HEAD, ONNX_JSON, "probe.json"}
    video = data["root"] / "videos" / "video05.mp4"
    rows = {}
    for runtime, folder in (("torch", probe), ("onnx", out)):
        result = invoke(
            "predict", "--probe", folder, "--online", video, "--out", tmp_path / runtime,
            "--runtime", runtime, "--no-progression", *CPU,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        rows[runtime] = {"video05": read_csv(tmp_path / runtime / "video05.csv")[1]}
    _check_parity(rows["torch"], rows["onnx"], FeatureStore(data["store"]).class_names)


def test_refusals_are_one_line(data, exported, tmp_path):
    video = data["root"] / "videos" / "video05.mp4"
    line = one_error_line(
        invoke("predict", "--probe", data["probe"], video, "--out", tmp_path, "--runtime", "onnx")
    )
    assert "holds no ONNX export" in line and "plstitch export-onnx" in line
    line = one_error_line(invoke("export-onnx", data["probe"], "--out", exported))
    assert "exists; pass --overwrite" in line
    (tmp_path / "mine").mkdir()
    line = one_error_line(invoke("export-onnx", data["probe"], "--out", tmp_path / "mine", "--overwrite"))
    assert "is not an ONNX export folder" in line  # --overwrite never replaces a folder it did not write
    line = one_error_line(invoke("predict", "--probe", exported, video, "--out", tmp_path, "--runtime", "tf"))
    assert "--runtime must be one of torch, onnx" in line


def test_a_changed_graph_or_another_head_is_refused(data, exported, tmp_path):
    """The graphs are tied to the head they were exported from and to their recorded digests."""
    video = data["root"] / "videos" / "video05.mp4"
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    graph = copy / HEAD
    pinned = sha256_file(graph)
    graph.write_bytes(graph.read_bytes() + b"\0")
    line = one_error_line(
        invoke("predict", "--probe", copy, video, "--out", tmp_path / "a", "--runtime", "onnx")
    )
    assert pinned in line and sha256_file(graph) in line and "plstitch export-onnx" in line

    shutil.copytree(exported, tmp_path / "other")
    temporal = _temporal_probe(data, tmp_path / "temporal", causal=True)
    for name in ("probe.json", "probe.safetensors"):  # a valid probe folder, but not the exported head
        shutil.copyfile(temporal / name, tmp_path / "other" / name)
    line = one_error_line(
        invoke("predict", "--probe", tmp_path / "other", video, "--out", tmp_path / "b", "--runtime", "onnx")
    )
    assert "was exported from a head with sha256" in line


def _published(hf_cache, folder, repo, repo_id):  # noqa: F811
    """`push-to-hub --dry-run --out repo`, laid out as a cache entry: the files published."""
    result = invoke("push-to-hub", folder, "--repo-id", repo_id, "--dry-run", "--out", repo)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in repo.iterdir())
    hf_cache(repo_id, {n: (lambda target, src=repo / n: shutil.copyfile(src, target)) for n in names})
    return names


def test_a_published_export_runs_by_name_and_a_published_probe_exports(data, exported, tmp_path, hf_cache):  # noqa: F811
    class_names = load_probe(data["probe"]).class_names
    _, folder_rows = _predict(data, exported, tmp_path / "folder", "--runtime", "onnx")

    names = _published(hf_cache, exported, tmp_path / "repo", "me/c80-onnx")
    assert {HEAD, RECOGNIZER, ONNX_JSON} < set(names)
    assert json.loads((tmp_path / "repo" / "config.json").read_text())["onnx"]["opset"] == 17
    summary, hub_rows = _predict(data, "hf-hub:me/c80-onnx", tmp_path / "hub", "--runtime", "onnx")
    assert summary["probe"].startswith("hf-hub:me/c80-onnx@") and summary["runtime"] == "onnxruntime"
    _check_parity(folder_rows, hub_rows, class_names)
    listed = json.loads(invoke("probes", "--json", "-").stdout)
    assert [row["onnx"] for row in listed] == [True]

    # a probe published without graphs: --runtime onnx says how to export it; export-onnx takes its name
    assert ONNX_JSON not in _published(hf_cache, data["probe"], tmp_path / "plain", "me/c80-plain")
    video = data["root"] / "videos" / "video05.mp4"
    line = one_error_line(
        invoke(
            "predict", "--probe", "hf-hub:me/c80-plain", video, "--out", tmp_path / "x", "--runtime", "onnx"
        )
    )
    assert "published without an ONNX export" in line and "export-onnx hf-hub:me/c80-plain --out" in line
    result = invoke("export-onnx", "hf-hub:me/c80-plain", "--out", tmp_path / "from-hub")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["probe"].startswith("hf-hub:me/c80-plain@")
    assert load_probe(tmp_path / "from-hub").source["hub"] == record["probe"]
    _, exported_rows = _predict(data, tmp_path / "from-hub", tmp_path / "from-hub-run", "--runtime", "onnx")
    _check_parity(folder_rows, exported_rows, class_names)
