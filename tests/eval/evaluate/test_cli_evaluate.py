"""`plstitch knn|linear|cv|score|table` through Typer's test runner on a tiny store and MS-TCN files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.protocols import read_label_file, video_key
from plstitch_eval.utils.console import is_quiet

from .conftest import relabel

runner = CliRunner()


def invoke(*args):
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result


def test_knn_linear_cv_and_table(tiny_store, tmp_path):
    store = tiny_store.root
    knn = invoke("knn", "--features", store, "--k", 5, "--json", tmp_path / "knn.json")
    assert "accuracy" in knn.stdout
    lin_args = ("--lr", 0.1, "--wd", 0.0, "--epochs", 3, "--device", "cpu", "--json", tmp_path / "lin.json")
    invoke("linear", "--features", store, *lin_args)
    cv = invoke("cv", "--features", store, "--folds", 3, "--protocol", "knn", "--json", tmp_path / "cv.json")
    assert "±" in cv.stdout
    results = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("knn", "lin", "cv")]
    assert [r["task"] for r in results] == ["knn", "linear", "cv"]
    assert results[1]["protocol"]["chosen_lr"] == 0.1
    assert set(results[2]["metrics_std"]) == set(results[2]["metrics"])

    md = invoke(
        "table", tmp_path / "knn.json", tmp_path / "lin.json", tmp_path / "cv.json", "--format", "markdown"
    )
    lines = md.stdout.strip().splitlines()
    assert lines[0].startswith("| Model | gtea knn Acc | gtea knn Edit")
    assert lines[2].startswith("| tiny-test-encoder |") and "±" in lines[2]
    acc = results[0]["metrics"]["accuracy"]
    assert f"{acc:.1f}" in lines[2]
    tex = invoke("table", tmp_path / "knn.json", "--format", "latex")
    assert "\\begin{tabular}" in tex.stdout and "\\multicolumn{5}{c}{gtea (knn)}" in tex.stdout
    invoke("table", tmp_path / "knn.json", "--format", "rich", "--out", tmp_path / "t.md")
    assert (tmp_path / "t.md").read_text().startswith("| Model |")


def write_mstcn(tmp_path):
    gt_dir, pred_dir = tmp_path / "groundTruth", tmp_path / "pred"
    gt_dir.mkdir()
    pred_dir.mkdir()
    gt = {"S1_Cheese_C1": ["background", "background", "take", "take", "take", "open", "open", "background"]}
    gt["S2_Tea_C1"] = ["take", "take", "pour", "pour", "pour"]
    pred = {
        "S1_Cheese_C1": ["background", "take", "take", "take", "take", "open", "background", "background"]
    }
    pred["S2_Tea_C1"] = ["take", "take", "pour", "take", "pour"]
    for video, labels in gt.items():
        (gt_dir / f"{video}.txt").write_text("\n".join(labels) + "\n")
    # MS-TCN writes the header form without an extension; the other file is one label per line.
    (pred_dir / "S1_Cheese_C1").write_text(
        "### Frame level recognition: ###\n" + " ".join(pred["S1_Cheese_C1"])
    )
    (pred_dir / "S2_Tea_C1.txt").write_text("\n".join(pred["S2_Tea_C1"]) + "\n")
    (tmp_path / "mapping.txt").write_text("0 background\n1 take\n2 open\n3 pour\n")
    return gt_dir, pred_dir, gt, pred


def test_score_reads_both_mstcn_forms(tmp_path):
    gt_dir, pred_dir, gt, pred = write_mstcn(tmp_path)
    assert read_label_file(pred_dir / "S1_Cheese_C1") == pred["S1_Cheese_C1"]
    assert video_key(pred_dir / "S1_Cheese_C1") == video_key(gt_dir / "S1_Cheese_C1.txt") == "S1_Cheese_C1"
    out = tmp_path / "score.json"
    result = invoke(
        "score",
        "--pred",
        pred_dir,
        "--gt",
        gt_dir,
        "--bg",
        "background",
        "--mapping",
        tmp_path / "mapping.txt",
        "--json",
        out,
    )
    assert "f1@50" in result.stdout
    res = json.loads(out.read_text())
    assert res["class_names"] == ["background", "take", "open", "pour"]
    n_right = sum(a == b for v in gt for a, b in zip(gt[v], pred[v], strict=True))
    assert res["metrics"]["accuracy"] == pytest.approx(100 * n_right / 13)
    # Segments without background: video 1 GT take[2,5) open[5,7), pred take[1,5) IoU .75, open[5,6) IoU .5;
    # video 2 GT take[0,2) pour[2,5), pred take[0,2) pour[2,3) take[3,4) pour[4,5) -> 2 TP@10, 2 FP, 0 FN.
    assert res["metrics"]["f1@10"] == pytest.approx(100 * 2 * (4 / 6) * 1 / (4 / 6 + 1))
    assert res["metrics"]["edit"] == pytest.approx((100 + 50) / 2)
    assert res["predictions"]["S2_Tea_C1"] == [1, 1, 3, 1, 3]


def test_score_length_mismatch_is_one_line_error(tmp_path):
    gt_dir, pred_dir, _, _ = write_mstcn(tmp_path)
    (pred_dir / "S2_Tea_C1.txt").write_text("take\npour\n")
    result = runner.invoke(app, ["score", "--pred", str(pred_dir), "--gt", str(gt_dir)])
    assert result.exit_code == 1
    assert "S2_Tea_C1" in result.output and "Traceback" not in result.output


def test_bad_store_and_options_are_one_line_errors(tmp_path, tiny_store):
    result = runner.invoke(app, ["knn", "--features", str(tmp_path / "missing")])
    assert result.exit_code == 1 and "not a feature store" in result.output
    result = runner.invoke(app, ["knn", "--features", str(tiny_store.root), "--weighting", "cosine"])
    assert result.exit_code == 1 and "weighting" in result.output
    # choices are checked once, by the library: its one line names the option and the valid values
    (line,) = _stderr_lines(result)
    assert "weighting 'cosine'" in line and "exp, similarity, uniform" in line
    result = runner.invoke(app, ["linear", "--features", str(tiny_store.root), "--optimizer", "lbfgs"])
    assert result.exit_code == 1
    (line,) = _stderr_lines(result)
    assert "optimizer 'lbfgs'" in line and "sgd, adamw" in line
    bad_json = tmp_path / "bad.json"
    bad_json.write_text(json.dumps({"schema": "other"}))
    result = runner.invoke(app, ["table", str(bad_json)])
    assert result.exit_code == 1 and "schema" in result.output


def _stderr_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def test_json_dash_prints_only_json_on_stdout(tiny_store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = invoke("knn", "--features", tiny_store.root, "--k", 5, "--json", "-")
    results = json.loads(result.stdout)  # nothing else on stdout
    assert results["task"] == "knn" and results["protocol"]["k"] == 5
    assert "accuracy" in result.stderr  # the table moved to stderr
    assert not (tmp_path / "-").exists()  # `-` is stdout, not a file named "-"
    quiet = invoke("-q", "knn", "--features", tiny_store.root, "--k", 5, "--json", "-")
    assert json.loads(quiet.stdout)["metrics"] == results["metrics"] and quiet.stderr.strip() == ""


def test_quiet_keeps_the_results_table_on_stdout(tiny_store, tmp_path):
    out = tmp_path / "knn.json"
    loud = invoke("knn", "--features", tiny_store.root, "--json", out)
    assert "results written to" in loud.stderr
    quiet = invoke("--quiet", "knn", "--features", tiny_store.root, "--json", out)
    assert quiet.stderr.strip() == "" and quiet.stdout == loud.stdout and out.is_file()
    assert not is_quiet()  # --quiet held for that invocation only


def test_store_with_labels_beyond_class_names_is_refused(tiny_store, tmp_path):
    manifest = {k: v for k, v in tiny_store.manifest.items() if k != "format_version"}
    manifest["class_names"] = manifest["class_names"][:-1]
    tiny_store.write_manifest(manifest)
    out = tmp_path / "knn.json"
    result = runner.invoke(app, ["knn", "--features", str(tiny_store.root), "--json", str(out)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = _stderr_lines(result)
    assert len(lines) == 1
    assert str(tiny_store.root / "manifest.json") in lines[0] and "class_names" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize("folder", ["[exp1]", "[/old]", "[bold]x[/bold]"])
def test_bracketed_paths_are_reported_verbatim(tmp_path, folder):
    features = tmp_path / "runs" / folder / "feats"
    result = runner.invoke(app, ["knn", "--features", str(features)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    lines = _stderr_lines(result)
    assert len(lines) == 1 and str(features) in lines[0] and "not a feature store" in lines[0]


def test_quiet_still_shows_warnings(tiny_store):
    from plstitch_eval.store.features import VideoFeatures

    for video in tiny_store.splits()["train"]:  # class 3 only in val/test: k-NN warns it cannot predict it
        item = tiny_store.read(video)
        labels = item.labels.copy()
        labels[labels == 3] = 2
        tiny_store.write(VideoFeatures(video, item.features, labels, item.frame_times))
    quiet = invoke("-q", "knn", "--features", tiny_store.root)
    assert "cannot be predicted" in " ".join(quiet.stderr.split()) and "accuracy" in quiet.stdout


def _train_frames(store) -> int:
    return sum(int((store.read(v).labels >= 0).sum()) for v in store.splits()["train"])


def test_knn_k_above_training_frames_warns_and_records_the_k_used(tiny_store, tmp_path):
    n_train = _train_frames(tiny_store)
    out = tmp_path / "knn.json"
    result = invoke("knn", "--features", tiny_store.root, "--k", 5000, "--json", out)
    assert f"k=5000 > {n_train} training frames: using k={n_train}" in " ".join(result.stderr.split())
    title = " ".join(result.stdout.split())
    assert f"k-NN (k={n_train}, exp)" in title and "k=5000" not in title  # the table names the k used
    protocol = json.loads(out.read_text())["protocol"]
    assert (protocol["k"], protocol["k_requested"]) == (n_train, 5000)


def test_knn_several_k_prints_and_records_every_k(tiny_store, tmp_path):
    """`--k 1 --k 5000 --weighting uniform`: k=1 is near perfect, every training frame voting uniformly
    predicts the majority training class; both accuracies are printed, one column per k."""
    n_train = _train_frames(tiny_store)
    out = tmp_path / "knn.json"
    args = ("--features", tiny_store.root, "--weighting", "uniform", "--json", out)
    result = invoke("knn", "--k", 1, "--k", 5000, *args)
    res = json.loads(out.read_text())
    assert list(res["metrics_by_k"]) == ["1", str(n_train)]
    train_labels = np.concatenate([tiny_store.read(v).labels for v in tiny_store.splits()["train"]])
    test_labels = np.concatenate([tiny_store.read(v).labels for v in tiny_store.splits()["test"]])
    majority_acc = 100 * np.mean(test_labels == np.bincount(train_labels).argmax())
    by_k = {k: m["accuracy"] for k, m in res["metrics_by_k"].items()}
    assert by_k[str(n_train)] == pytest.approx(majority_acc) and by_k["1"] > majority_acc + 10
    lines = result.stdout.splitlines()
    header = next(line for line in lines if "metric" in line)
    assert header.index("k=1 ") < header.index(f"k={n_train}")
    (accuracy,) = [line for line in lines if line.strip("│ ").startswith("accuracy ")]
    assert f"{by_k['1']:.2f}" in accuracy and f"{majority_acc:.2f}" in accuracy


@pytest.mark.parametrize("command", [("knn",), ("linear", "--epochs", 1, "--device", "cpu"), ("cv",)])
def test_one_class_store_is_one_line_error(tiny_store, tmp_path, command):
    for video in tiny_store.videos():
        relabel(tiny_store, video, np.full(len(tiny_store.read(video).labels), 2))
    out = tmp_path / "r.json"
    result = runner.invoke(app, [str(a) for a in (*command, "--features", tiny_store.root, "--json", out)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    (line,) = _stderr_lines(result)
    assert str(tiny_store.root) in line and "only one class ('stir')" in line
    assert "accuracy" not in result.stdout and not out.exists()
