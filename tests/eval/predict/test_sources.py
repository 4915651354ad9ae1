"""Inputs (`predict.sources`): a bad video is one line; --root takes every video; --labels and --dataset give
ground truth."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from plstitch_eval.probes import load_probe
from plstitch_eval.store.features import FeatureStore
from tests.eval.predict.conftest import CPU, VIDEO, invoke, one_error_line, video_file


@pytest.mark.parametrize("kind", ["missing", "not a video"])
def test_bad_video_is_one_line(data, tmp_path, kind):
    video = tmp_path / "clip.mp4"
    if kind == "not a video":
        video.write_text("just text\n")
    line = one_error_line(invoke("predict", "--probe", data["probe"], video, "--out", tmp_path / "o", *CPU))
    assert str(video) in line
    assert not (tmp_path / "o").exists()


def test_root_predicts_every_video_and_labels_give_ground_truth(data, tmp_path):
    folder = tmp_path / "videos"
    folder.mkdir()
    for name in ("video05", "video06"):
        shutil.copy(video_file(data, name), folder / f"{name}.mp4")
    (folder / "notes.txt").write_text("not a video\n")
    result = invoke("predict", "--probe", data["probe"], "--root", folder, "--out", tmp_path / "all", *CPU)
    assert result.exit_code == 0, result.output
    by_root = {v["video"]: v for v in json.loads(result.stdout)["videos"]}
    assert sorted(by_root) == ["video05", "video06"] and "accuracy" not in by_root["video05"]

    labels = data["root"] / "phase_annotations" / f"{VIDEO}-phase.txt"
    args = (
        "predict",
        "--probe",
        data["probe"],
        video_file(data),
        "--labels",
        labels,
        "--out",
        tmp_path / "gt",
    )
    labelled = invoke(*args, *CPU)
    assert labelled.exit_code == 0, labelled.output
    video = json.loads(labelled.stdout)["videos"][0]
    stored = FeatureStore(data["store"]).read(VIDEO)  # labels at the sampled frames, from the annotations
    expected = 100 * np.mean(load_probe(data["probe"]).predict(stored.features) == stored.labels)
    assert video["accuracy"] == pytest.approx(expected) and video["labelled_frames"] == len(stored.labels)
    assert video["segments"] == by_root[VIDEO]["segments"]

    dataset = invoke(
        "predict", "--probe", data["probe"], "--dataset", "cholec80", "--root", data["root"],
        "--videos", VIDEO, "--out", tmp_path / "ds", *CPU,
    )  # fmt: skip
    assert dataset.exit_code == 0, dataset.output
    assert json.loads(dataset.stdout)["videos"][0]["accuracy"] == pytest.approx(expected)
