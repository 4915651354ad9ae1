"""`plstitch predict` end to end: real synthetic MP4s, the shipped tiny model, a linear probe saved by
`plstitch linear --save`; predictions equal the evaluation path's, refusals are one line."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import av
import numpy as np
import pytest
from typer.testing import CliRunner

from plstitch_eval.analysis.progression import minmax_progress, score_frames
from plstitch_eval.cli import app
from plstitch_eval.data.datasets import get_dataset
from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.data.video import read_frames
from plstitch_eval.errors import ConfigError
from plstitch_eval.extract import ExtractOptions, extract_features, preprocessing_record
from plstitch_eval.features import FeatureStore
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.temporal_head import load_temporal_head
from plstitch_eval.predict import (
    PredictOptions,
    VideoSource,
    load_probe_encoder,
    predict_online,
    predict_videos,
)
from plstitch_eval.preprocess import frame_plan
from plstitch_eval.probes import LinearProbeHead, load_probe, save_probe
from plstitch_eval.temporal.mstcn import MultiStageTCN

MODEL = "plstitch-tiny-synthetic"
FPS = 2.0  # the probe's store: 8-12 frames per video
SYNTHETIC = {"n_videos": 6, "size": 64, "seed": 0, "min_seconds": 4.0, "max_seconds": 6.0}
VIDEO = "video05"  # in the synthetic test split (the last third), so the results JSON predicts it
CPU = ["--device", "cpu", "--num-workers", "0"]

runner = CliRunner()


def _invoke(*args: str, input: bytes | None = None):
    return runner.invoke(app, [str(a) for a in args], input=input)


def _one_error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert result.exit_code == 1 and len(errors) == 1, result.stderr
    assert "Traceback" not in result.output
    return errors[0]


def _read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Six synthetic videos, their feature store at 2 fps (shipped tiny model) and a linear probe saved by
    `plstitch linear --save`, with the results JSON of that run."""
    tmp = tmp_path_factory.mktemp("predict")
    root = generate_synthetic(tmp / "synthetic", workers=1, **SYNTHETIC)
    adapter = get_dataset("synthetic", root=root, **SYNTHETIC)
    options = ExtractOptions(fps=FPS, num_workers=0, device="cpu", progress=False)
    assert extract_features(adapter, MODEL, tmp / "store", options).ok
    result = _invoke(
        "linear", "--features", tmp / "store", "--epochs", 5, "--device", "cpu",
        "--save", tmp / "probe", "--json", tmp / "results.json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return {"root": root, "store": tmp / "store", "probe": tmp / "probe", "results": tmp / "results.json"}


def _video(data: dict[str, Path], name: str = VIDEO) -> Path:
    return data["root"] / "videos" / f"{name}.mp4"


def _remux(source: Path, target: Path, fmt: str = "matroska") -> Path:
    """The same H.264 packets in a streamable container (an MP4 cannot be read from a pipe)."""
    with av.open(str(source)) as src, av.open(str(target), "w", format=fmt) as dst:
        stream = src.streams.video[0]
        out = dst.add_stream_from_template(stream)
        for packet in src.demux(stream):
            if packet.dts is not None:
                packet.stream = out
                dst.mux(packet)
    return target


def test_predictions_equal_the_evaluation_path(data, tmp_path):
    # the evaluation path: `plstitch extract` of the same video, the probe on the stored features
    extracted = _invoke(
        "extract", "--dataset", "cholec80", "--root", data["root"], "--model", MODEL, "--fps", FPS,
        "--videos", VIDEO, "--out", tmp_path / "store", *CPU,
    )  # fmt: skip
    assert extracted.exit_code == 0, extracted.output
    stored = FeatureStore(tmp_path / "store").read(VIDEO)
    probe = load_probe(data["probe"])

    result = _invoke("predict", "--probe", data["probe"], _video(data), "--out", tmp_path / "out", *CPU)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)

    columns, rows = _read_csv(tmp_path / "out" / f"{VIDEO}.csv")
    assert columns == ["time_s", "frame_index", "predicted", *probe.class_names, "progression"]
    n_frames = len(list(read_frames(_video(data), fps=FPS)))
    assert len(rows) == n_frames == len(stored.features) == summary["videos"][0]["frames"]
    probabilities = np.array([[np.float32(row[name]) for name in probe.class_names] for row in rows])
    np.testing.assert_array_equal(probabilities, probe.probabilities(stored.features))
    predicted = [row["predicted"] for row in rows]
    assert predicted == [probe.class_names[i] for i in probe.predict(stored.features)]
    evaluated = json.loads(data["results"].read_text())["predictions"][VIDEO]  # `plstitch linear`'s own
    assert predicted == [probe.class_names[i] for i in evaluated]
    np.testing.assert_allclose([float(row["time_s"]) for row in rows], stored.frame_times, atol=1e-6)
    assert [int(row["frame_index"]) for row in rows] == list(range(n_frames))
    head = load_temporal_head(MODEL)
    progress = minmax_progress(score_frames(stored.features, head))
    np.testing.assert_allclose([float(row["progression"]) for row in rows], progress, atol=1e-6)

    png = tmp_path / "out" / f"{VIDEO}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    video = summary["videos"][0]
    assert video["files"] == {"csv": str(tmp_path / "out" / f"{VIDEO}.csv"), "png": str(png)}
    share = {name: predicted.count(name) / n_frames for name in set(predicted)}
    assert video["class_share"] == pytest.approx(share)
    assert sum(s["frames"] for s in video["segments"]) == n_frames and summary["ok"] is True
    assert not list((tmp_path / "out").glob(".*"))  # atomic writes left no temp file


def _edited_probe(data, tmp_path: Path, edit) -> Path:
    folder = tmp_path / "probe"
    shutil.copytree(data["probe"], folder)
    record = json.loads((folder / "probe.json").read_text())
    edit(record)
    (folder / "probe.json").write_text(json.dumps(record))
    return folder


def test_probe_of_other_weights_is_refused(data, tmp_path):
    real = load_probe(data["probe"]).encoder["weights_sha256"]
    folder = _edited_probe(data, tmp_path, lambda r: r["encoder"].update(weights_sha256="ab" * 32))
    line = _one_error_line(_invoke("predict", "--probe", folder, _video(data), "--out", tmp_path / "o", *CPU))
    assert "abababababab" in line and real[:12] in line and MODEL in line
    assert "probe.json" in line and "--model" not in line  # predict's fix: it takes no --model
    assert not (tmp_path / "o").exists()


def test_probe_of_other_preprocessing_is_refused(data, tmp_path):
    folder = _edited_probe(data, tmp_path, lambda r: r["preprocessing"].update(resize_size=96))
    line = _one_error_line(_invoke("predict", "--probe", folder, _video(data), "--out", tmp_path / "o", *CPU))
    assert '"resize_size": 96' in line and '"resize_size": 73' in line


def _whole_seconds(times: list[float]) -> list[int]:
    """Index of the first frame of each whole video second."""
    firsts, seen = [], set()
    for i, t in enumerate(times):
        if int(np.floor(t + 1e-6)) not in seen:
            seen.add(int(np.floor(t + 1e-6)))
            firsts.append(i)
    return firsts


def test_online_from_a_pipe_prints_each_second_as_offline(data, tmp_path):
    mkv = _remux(_video(data), tmp_path / f"{VIDEO}.mkv")
    offline = _invoke("predict", "--probe", data["probe"], mkv, "--out", tmp_path / "offline", *CPU)
    assert offline.exit_code == 0, offline.output
    _, rows = _read_csv(tmp_path / "offline" / f"{VIDEO}.csv")

    online = _invoke(
        "predict", "--probe", data["probe"], "-", "--online", "--out", tmp_path / "online", *CPU,
        input=mkv.read_bytes(),
    )  # fmt: skip
    assert online.exit_code == 0, online.output
    lines = online.stdout.splitlines()
    firsts = _whole_seconds([float(row["time_s"]) for row in rows])
    assert len(lines) == len(firsts) == 6  # a 6 s video: one line per second
    for line, i in zip(lines, firsts, strict=True):
        assert line.split()[:3] == [f"{float(rows[i]['time_s']):.1f}", "s", rows[i]["predicted"]]
        latency = line.rsplit("latency=", 1)[1]
        assert latency.endswith(" ms") and float(latency[:-3]) >= 0
    _, online_rows = _read_csv(tmp_path / "online" / "stdin.csv")
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
    source = VideoSource(VIDEO, _video(data))
    offline = predict_videos(probe, model, [source], tmp_path / "out", PredictOptions(num_workers=0))
    updates = []
    online = predict_online(probe, model, source, updates.append)
    whole = offline.predictions[0]
    np.testing.assert_array_equal(online.frame_times, whole.frame_times)
    np.testing.assert_allclose(online.probabilities, whole.probabilities, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(online.predicted, whole.predicted)
    assert [u.phase for u in updates] == [
        probe.class_names[whole.predicted[i]] for i in _whole_seconds(list(whole.frame_times))
    ]

    centred = load_probe(_temporal_probe(data, tmp_path / "acausal", causal=False))
    with pytest.raises(ConfigError, match="not causal") as info:
        predict_online(centred, model, source, updates.append)
    assert "\n" not in str(info.value)


def test_existing_outputs_are_refused_unless_overwrite(data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{VIDEO}.png").write_bytes(b"keep me")
    args = ("predict", "--probe", data["probe"], _video(data), "--out", out, *CPU)
    line = _one_error_line(_invoke(*args))
    assert str(out / f"{VIDEO}.png") in line and "--overwrite" in line
    assert (out / f"{VIDEO}.png").read_bytes() == b"keep me" and not (out / f"{VIDEO}.csv").exists()
    assert _invoke(*args, "--overwrite").exit_code == 0
    assert (out / f"{VIDEO}.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("kind", ["missing", "not a video"])
def test_bad_video_is_one_line(data, tmp_path, kind):
    video = tmp_path / "clip.mp4"
    if kind == "not a video":
        video.write_text("just text\n")
    line = _one_error_line(_invoke("predict", "--probe", data["probe"], video, "--out", tmp_path / "o", *CPU))
    assert str(video) in line
    assert not (tmp_path / "o").exists()


def test_root_predicts_every_video_and_labels_give_ground_truth(data, tmp_path):
    folder = tmp_path / "videos"
    folder.mkdir()
    for name in ("video05", "video06"):
        shutil.copy(_video(data, name), folder / f"{name}.mp4")
    (folder / "notes.txt").write_text("not a video\n")
    result = _invoke("predict", "--probe", data["probe"], "--root", folder, "--out", tmp_path / "all", *CPU)
    assert result.exit_code == 0, result.output
    by_root = {v["video"]: v for v in json.loads(result.stdout)["videos"]}
    assert sorted(by_root) == ["video05", "video06"] and "accuracy" not in by_root["video05"]

    labels = data["root"] / "phase_annotations" / f"{VIDEO}-phase.txt"
    args = ("predict", "--probe", data["probe"], _video(data), "--labels", labels, "--out", tmp_path / "gt")
    labelled = _invoke(*args, *CPU)
    assert labelled.exit_code == 0, labelled.output
    video = json.loads(labelled.stdout)["videos"][0]
    stored = FeatureStore(data["store"]).read(VIDEO)  # labels at the sampled frames, from the annotations
    expected = 100 * np.mean(load_probe(data["probe"]).predict(stored.features) == stored.labels)
    assert video["accuracy"] == pytest.approx(expected) and video["labelled_frames"] == len(stored.labels)
    assert video["segments"] == by_root[VIDEO]["segments"]

    dataset = _invoke(
        "predict", "--probe", data["probe"], "--dataset", "cholec80", "--root", data["root"],
        "--videos", VIDEO, "--out", tmp_path / "ds", *CPU,
    )  # fmt: skip
    assert dataset.exit_code == 0, dataset.output
    assert json.loads(dataset.stdout)["videos"][0]["accuracy"] == pytest.approx(expected)


def test_probe_of_a_transformed_store_gets_that_transform(data, tmp_path):
    # a store extracted with `--transform whole-frame` records a crop mode the model's config does not have
    store = FeatureStore(data["store"])
    squashed = load_encoder(MODEL, transform="whole-frame")
    record = preprocessing_record(squashed.data_config, frame_plan(squashed.data_config, FPS))
    manifest = {**store.manifest, "preprocessing": record}
    head = LinearProbeHead.empty(64, len(store.class_names))
    folder = save_probe(tmp_path / "probe", "linear", head, manifest, store.class_names, {}, {})
    model = load_probe_encoder(load_probe(folder), PredictOptions(device="cpu", progression=False))
    assert model.plan.squash and model.plan.crop == (64, 64)
    assert model.encoder.provenance["transform"] == "whole-frame"


# ------------------------------------------------------------------------------------------------ decoders


def _torchcodec_or_skip() -> None:
    from plstitch_eval.data import torchcodec_decode

    pytest.importorskip("torchcodec")
    torchcodec_decode.unavailable_reason.cache_clear()
    if (reason := torchcodec_decode.unavailable_reason()) is not None:
        pytest.skip(reason)


def test_predict_with_torchcodec_equals_pyav(data, tmp_path):
    _torchcodec_or_skip()
    runs = {}
    for decoder in ("pyav", "torchcodec"):
        out = tmp_path / decoder
        result = _invoke(
            "predict", "--probe", data["probe"], _video(data), "--out", out, "--decoder", decoder, *CPU
        )
        assert result.exit_code == 0, result.output
        runs[decoder] = _read_csv(out / f"{VIDEO}.csv")
    assert runs["torchcodec"] == runs["pyav"]  # the same frames, pixels, features and probabilities


def test_predict_decodes_as_the_probe_features_were_made(data, tmp_path):
    _torchcodec_or_skip()
    from plstitch_eval.predict import predict_decoding

    sources = [VideoSource(VIDEO, _video(data))]
    pyav_probe = load_probe(data["probe"])
    model = load_probe_encoder(pyav_probe, PredictOptions(device="cpu", progression=False))
    assert predict_decoding(pyav_probe, model, sources, PredictOptions()).decoder == "pyav"
    # a probe of TorchCodec features: loaded (the decoder is not held against it), decoded with TorchCodec
    folder = _edited_probe(data, tmp_path, lambda r: r["preprocessing"].update(decoder="torchcodec"))
    tc_probe = load_probe(folder)
    model = load_probe_encoder(tc_probe, PredictOptions(device="cpu", progression=False))
    assert predict_decoding(tc_probe, model, sources, PredictOptions()).decoder == "torchcodec"
    assert predict_decoding(tc_probe, model, sources, PredictOptions(decoder="pyav")).decoder == "pyav"
