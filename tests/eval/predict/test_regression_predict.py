"""`plstitch predict` with a regression probe (`linear` / `temporal --task rsd|anticipation --save`): the CSV
and every `--jsonl` line hold `remaining_min` / `next_<class>_min`, equal to the probe on the store's
features (extraction's path); online equals offline for causal heads; the timeline draws the truth of a
labelled case; a regression probe is refused where classes are needed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.metrics.remaining import remaining_targets
from plstitch_eval.predict import VideoPrediction, csv_text, plot_prediction
from plstitch_eval.probes import ProbeError, load_probe
from plstitch_eval.store.features import FeatureStore
from tests.eval.predict.conftest import CPU, VIDEO, invoke, read_csv, video_file, whole_seconds
from tests.media import remux

FLOAT32 = 1e-4  # minutes: the probe's float32 head on the store's features against predict's


def _store_values(data, probe_dir: Path, video: str = VIDEO) -> tuple[np.ndarray, np.ndarray]:
    item = FeatureStore(data["store"]).read(video)
    return load_probe(probe_dir).values(item.features, item.frame_times), np.asarray(item.frame_times)


def test_offline_csv_holds_the_probe_minutes(data, regression_probes, tmp_path):
    out = tmp_path / "out"
    done = invoke(
        "predict",
        "--probe",
        regression_probes["rsd"],
        video_file(data),
        "--out",
        out,
        "--json",
        tmp_path / "s.json",
        *CPU,
    )
    assert done.exit_code == 0, done.output
    header, rows = read_csv(out / f"{VIDEO}.csv")
    assert header == ["time_s", "frame_index", "remaining_min", "progression"]  # the tiny model's head
    expected, times = _store_values(data, regression_probes["rsd"])
    np.testing.assert_allclose([float(r["time_s"]) for r in rows], times, atol=1e-6)
    np.testing.assert_allclose([float(r["remaining_min"]) for r in rows], expected[:, 0], atol=FLOAT32)
    assert (out / f"{VIDEO}.png").is_file()
    summary = json.loads((tmp_path / "s.json").read_text())["videos"][0]
    assert summary["last_min"]["remaining_min"] == pytest.approx(expected[-1, 0], abs=FLOAT32)
    assert "class_share" not in summary and "MAE_min" not in summary  # no labels given: no truth


def test_anticipation_columns_name_each_class(data, regression_probes, tmp_path):
    out = tmp_path / "out"
    done = invoke("predict", "--probe", regression_probes["ant"], video_file(data), "--out", out, *CPU)
    assert done.exit_code == 0, done.output
    header, rows = read_csv(out / f"{VIDEO}.csv")
    probe = load_probe(regression_probes["ant"])
    columns = [f"next_{name}_min" for name in probe.class_names]
    assert header == ["time_s", "frame_index", *columns, "progression"]
    expected, _ = _store_values(data, regression_probes["ant"])
    got = np.array([[float(r[c]) for c in columns] for r in rows])
    np.testing.assert_allclose(got, expected, atol=FLOAT32)
    assert got.min() >= 0.0 and got.max() <= 0.05 + 1e-9  # clipped at the horizon


@pytest.mark.parametrize("name", ["rsd", "tcn"])
def test_online_jsonl_equals_offline(data, regression_probes, tmp_path, name):
    mkv = remux(video_file(data), tmp_path / f"{VIDEO}.mkv")
    offline = invoke("predict", "--probe", regression_probes[name], mkv, "--out", tmp_path / "offline", *CPU)
    assert offline.exit_code == 0, offline.output
    _, rows = read_csv(tmp_path / "offline" / f"{VIDEO}.csv")
    online = invoke(
        "predict", "--probe", regression_probes[name], "-", "--online", "--out", tmp_path / "online",
        "--jsonl", tmp_path / "live.jsonl", *CPU, input=mkv.read_bytes(),
    )  # fmt: skip
    assert online.exit_code == 0, online.output
    lines = [json.loads(line) for line in (tmp_path / "live.jsonl").read_text().splitlines()]
    assert len(lines) == len(rows)
    for line, row in zip(lines, rows, strict=True):
        assert "predicted" not in line and line["time_s"] == pytest.approx(float(row["time_s"]), abs=1e-6)
        assert line["remaining_min"] == pytest.approx(float(row["remaining_min"]), abs=1e-5)
    seconds = [line for line in online.stdout.splitlines() if " s  remaining " in line]
    assert len(seconds) == len(whole_seconds([float(r["time_s"]) for r in rows]))
    assert "p=" not in seconds[0]


def test_timeline_draws_the_truth_of_a_labelled_case() -> None:
    times = np.arange(12, dtype=np.float64) * 5.0
    values = np.linspace(1.0, 0.1, 12)[:, None]
    labelled = VideoPrediction(
        "v", "v.mp4", times, np.zeros((12, 0)), np.zeros(0, np.int64), labels=np.zeros(12, np.int64),
        values=values, columns=["remaining_min"], task="rsd",
    )  # fmt: skip
    truth = remaining_targets(times)
    np.testing.assert_allclose(labelled.truth_minutes, (times[-1] + 5.0 - times) / 60.0)
    figure = plot_prediction(labelled, ["remaining"], "v")
    dashed = [line for line in figure.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and np.allclose(dashed[0].get_ydata(), truth)
    assert labelled.summary([])["MAE_min"] == pytest.approx(float(np.mean(np.abs(values[:, 0] - truth))))
    unlabelled = VideoPrediction(
        "v", "v.mp4", times, np.zeros((12, 0)), np.zeros(0, np.int64), values=values,
        columns=["remaining_min"], task="rsd",
    )  # fmt: skip
    assert unlabelled.truth_minutes is None
    assert csv_text(unlabelled, []).splitlines()[0] == "time_s,frame_index,remaining_min"


def test_regression_probe_is_refused_where_classes_are_needed(data, regression_probes, tmp_path) -> None:
    probe = load_probe(regression_probes["rsd"])
    item = FeatureStore(data["store"]).read(VIDEO)
    with pytest.raises(ProbeError, match="regression probe") as info:
        probe.predict(item.features)
    assert "\n" not in str(info.value)


def test_a_labelled_case_gives_the_rsd_error_against_its_truth(data, regression_probes, tmp_path) -> None:
    """`--dataset` reads the case's phase labels with the probe's training phases (not its outputs), so the
    summary scores the minutes against the true remaining time."""
    assert load_probe(regression_probes["rsd"]).label_classes == FeatureStore(data["store"]).class_names
    done = invoke(
        "predict", "--probe", regression_probes["rsd"], "--dataset", "cholec80", "--root", data["root"],
        "--videos", VIDEO, "--out", tmp_path / "ds", *CPU,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)["videos"][0]
    _, rows = read_csv(tmp_path / "ds" / f"{VIDEO}.csv")
    times = np.array([float(r["time_s"]) for r in rows])
    minutes = np.array([float(r["remaining_min"]) for r in rows])
    step = np.median(np.diff(times))  # the video ends one frame step after its last sampled frame
    truth = (times[-1] + step - times) / 60.0
    assert summary["MAE_min"] == pytest.approx(float(np.mean(np.abs(minutes - truth))), abs=1e-6)
