"""`plstitch datasets`, `plstitch extract` and `plstitch export-mstcn` through Typer's CliRunner."""

from __future__ import annotations

import json
import shutil

import numpy as np
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.export_mstcn import export_mstcn
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.store.features import FeatureStore, VideoFeatures

runner = CliRunner()


def _extract_args(root, model, out):
    return ["extract", "--dataset", "cholec80", "--root", str(root), "--model", str(model), "--out", str(out),
            "--fps", "2", "--batch-size", "3", "--num-workers", "0", "--device", "cpu"]  # fmt: skip


def test_datasets_lists_adapters():
    result = runner.invoke(app, ["datasets"])
    assert result.exit_code == 0, result.output
    for name in ("cholec80", "m2cai16", "autolaparo", "gtea", "breakfast", "synthetic", "folder"):
        assert name in result.stdout


def test_extract_then_export(cholec_root, tiny_model_dir, tmp_path):
    store_dir = tmp_path / "store"
    result = runner.invoke(app, [*_extract_args(cholec_root, tiny_model_dir, store_dir), "--json", "-"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)  # `--json -`: stdout is the JSON alone (the table is on stderr)
    assert summary["ok"] and [v["status"] for v in summary["videos"]] == ["done"] * 3

    again = runner.invoke(app, [*_extract_args(cholec_root, tiny_model_dir, store_dir), "--json", "-"])
    assert again.exit_code == 0
    assert "skipped" in again.stdout

    out = tmp_path / "mstcn"
    exported = runner.invoke(app, ["export-mstcn", str(store_dir), "--out", str(out)])
    assert exported.exit_code == 0, exported.output
    store = FeatureStore(store_dir)
    names = store.class_names
    for video in store.videos():
        item = store.read(video)
        array = np.load(out / "features" / f"{video}.npy")
        assert array.dtype == np.float32 and array.shape == (32, len(item.labels))
        np.testing.assert_array_equal(array, item.features.T)
        lines = (out / "groundTruth" / f"{video}.txt").read_text().splitlines()
        assert lines == [names[i] for i in item.labels]
    mapping = (out / "mapping.txt").read_text().splitlines()
    assert mapping[:2] == ["0 Preparation", "1 CalotTriangleDissection"] and len(mapping) == 7
    # Cholec80's three schemes become split1..3; every video is in train for videos 1-3
    bundles = sorted(p.name for p in (out / "splits").iterdir())
    assert bundles == ["train.split1.bundle", "train.split2.bundle", "train.split3.bundle"]
    assert (out / "splits" / "train.split1.bundle").read_text().split() == [
        "video01.txt",
        "video02.txt",
        "video03.txt",
    ]


def test_export_one_scheme_and_spaces_in_names(tmp_path):
    store = FeatureStore.create(
        tmp_path / "store",
        {
            "dataset": "gtea",
            "class_names": ["take", "open lid", "background"],
            "split_schemes": {
                "split2": {"train": ["a"], "test": ["b"]},
                "split4": {"train": ["b"], "test": ["a"]},
            },
        },
    )
    for name, labels in (("a", [0, 1, 1]), ("b", [2, 0])):
        feats = np.arange(len(labels) * 4, dtype=np.float32).reshape(len(labels), 4)
        store.write(VideoFeatures(name, feats, np.array(labels), np.arange(len(labels), dtype=float)))
    result = export_mstcn(store.root, tmp_path / "out", split_scheme="split4")
    assert sorted(result.bundles) == ["test.split4.bundle", "train.split4.bundle"]
    assert (tmp_path / "out" / "splits" / "test.split4.bundle").read_text() == "a.txt\n"
    assert (tmp_path / "out" / "mapping.txt").read_text() == "0 take\n1 open_lid\n2 background\n"
    assert (tmp_path / "out" / "groundTruth" / "a.txt").read_text() == "take\nopen_lid\nopen_lid\n"
    np.testing.assert_array_equal(
        np.load(tmp_path / "out" / "features" / "b.npy"), np.arange(8, dtype=np.float32).reshape(2, 4).T
    )


def test_cli_corrupt_video_exits_non_zero(cholec_root, tiny_model_dir, tmp_path):
    root = tmp_path / "c80"
    shutil.copytree(cholec_root, root)
    (root / "videos" / "video03.mp4").write_bytes(b"not a video at all")
    result = runner.invoke(app, _extract_args(root, tiny_model_dir, tmp_path / "store"))
    assert result.exit_code == 1
    assert "video03" in result.output and "failed" in result.output
    assert FeatureStore(tmp_path / "store").videos() == ["video01", "video02"]
    fast = runner.invoke(app, [*_extract_args(root, tiny_model_dir, tmp_path / "s2"), "--fail-fast"])
    assert fast.exit_code == 1 and "video03.mp4" in fast.output and "Traceback" not in fast.output


def test_synthetic_without_model_needs_model(tmp_path, monkeypatch):
    # the shipped tiny model is `--dataset synthetic`'s default; without it, --model is needed
    assert "plstitch-tiny-synthetic" in MODELS
    monkeypatch.delitem(MODELS, "plstitch-tiny-synthetic")
    result = runner.invoke(app, ["extract", "--dataset", "synthetic", "--out", str(tmp_path / "s")])
    assert result.exit_code == 1, result.output
    assert "--model is required for dataset 'synthetic'" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "s").exists()  # refused before anything was written


def test_other_datasets_have_no_default_model(cholec_root, tmp_path):
    result = runner.invoke(app, ["extract", "--dataset", "cholec80", "--root", str(cholec_root),
                                 "--out", str(tmp_path / "s")])  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "--model is required for dataset 'cholec80'" in result.stderr


def test_quiet_silences_progress_and_tables_but_keeps_results(cholec_root, tiny_model_dir, tmp_path):
    args = [*_extract_args(cholec_root, tiny_model_dir, tmp_path / "store"), "--json", "-"]
    loud = runner.invoke(app, args)
    assert loud.exit_code == 0, loud.output
    assert "Feature extraction" in loud.stderr and "3/3" in loud.stderr  # summary table + progress bar
    quiet_args = [*_extract_args(cholec_root, tiny_model_dir, tmp_path / "quiet"), "--json", "-"]
    quiet = runner.invoke(app, ["-q", *quiet_args])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr.strip() == ""
    summary = json.loads(quiet.stdout)  # results on stdout stay
    assert summary["ok"] and [v["status"] for v in summary["videos"]] == ["done"] * 3
    again = runner.invoke(app, args)  # the next invocation without -q is loud again
    assert "Feature extraction" in again.stderr


def test_extract_json_writes_a_file(cholec_root, tiny_model_dir, tmp_path):
    out = tmp_path / "summary.json"
    args = _extract_args(cholec_root, tiny_model_dir, tmp_path / "store")
    result = runner.invoke(app, [*args, "--videos", "video02", "--json", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(out.read_text())
    assert [v["video"] for v in summary["videos"]] == ["video02"] and summary["ok"]
    assert result.stdout.strip() == ""  # the file holds the summary; the table went to stderr
