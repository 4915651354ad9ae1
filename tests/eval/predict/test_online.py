"""Online prediction (`predict.online`): from a pipe, one line per video second as offline; a causal temporal
probe equals its offline outputs, a non-causal one is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.predict import (
    PredictOptions,
    VideoSource,
    load_probe_encoder,
    predict_online,
    predict_videos,
)
from plstitch_eval.probes import load_probe, save_probe
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.temporal.mstcn import MultiStageTCN
from tests.eval.predict.conftest import CPU, VIDEO, invoke, read_csv, video_file, whole_seconds
from tests.media import remux


def test_online_from_a_pipe_prints_each_second_as_offline(data, tmp_path):
    mkv = remux(video_file(data), tmp_path / f"{VIDEO}.mkv")
    offline = invoke("predict", "--probe", data["probe"], mkv, "--out", tmp_path / "offline", *CPU)
    assert offline.exit_code == 0, offline.output
    _, rows = read_csv(tmp_path / "offline" / f"{VIDEO}.csv")

    online = invoke(
        "predict", "--probe", data["probe"], "-", "--online", "--out", tmp_path / "online", *CPU,
        input=mkv.read_bytes(),
    )  # fmt: skip
    assert online.exit_code == 0, online.output
    lines = online.stdout.splitlines()
    firsts = whole_seconds([float(row["time_s"]) for row in rows])
    assert len(lines) == len(firsts) == 6  # a 6 s video: one line per second
    for line, i in zip(lines, firsts, strict=True):
        assert line.split()[:3] == [f"{float(rows[i]['time_s']):.1f}", "s", rows[i]["predicted"]]
        latency = line.rsplit("latency=", 1)[1]
        assert latency.endswith(" ms") and float(latency[:-3]) >= 0
    _, online_rows = read_csv(tmp_path / "online" / "stdin.csv")
    assert [r["predicted"] for r in online_rows] == [r["predicted"] for r in rows]
    assert (tmp_path / "online" / "stdin.png").is_file()


def _temporal_probe(data, folder: Path, causal: bool) -> Path:
    settings = {"stages": 2, "layers": 3, "channels": 8, "dropout": 0.0, "causal": causal}
    store = FeatureStore(data["store"])
    model = MultiStageTCN(64, len(store.class_names), **settings)
    return save_probe(folder, "temporal", model, store.manifest, store.class_names, settings, {})


def test_online_temporal_causal_probe_equals_offline(data, tmp_path):
    probe = load_probe(_temporal_probe(data, tmp_path / "tcn", causal=True))
    model = load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0, progression=False))
    source = VideoSource(VIDEO, video_file(data))
    offline = predict_videos(probe, model, [source], tmp_path / "out", PredictOptions(num_workers=0))
    updates = []
    online = predict_online(probe, model, source, updates.append)
    whole = offline.predictions[0]
    np.testing.assert_array_equal(online.frame_times, whole.frame_times)
    np.testing.assert_allclose(online.probabilities, whole.probabilities, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(online.predicted, whole.predicted)
    assert [u.phase for u in updates] == [
        probe.class_names[whole.predicted[i]] for i in whole_seconds(list(whole.frame_times))
    ]

    centred = load_probe(_temporal_probe(data, tmp_path / "acausal", causal=False))
    with pytest.raises(ConfigError, match="not causal") as info:
        predict_online(centred, model, source, updates.append)
    assert "\n" not in str(info.value)
