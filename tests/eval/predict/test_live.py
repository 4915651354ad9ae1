"""Live sources (`predict.live`): a real MPEG-TS/H.264 stream sent at real-time pace over loopback UDP and TCP
(`plstitch_eval.utils.sender` in another process) is predicted as it arrives; the predictions equal the
offline ones of the same video; pauses, drops, a sender that stops, one that never comes and a model too slow
for the stream are each handled as documented."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest
import torch

from plstitch_eval.data.margin import MarginBox
from plstitch_eval.data.video import DecodedFrame
from plstitch_eval.errors import ConfigError, DecodeError
from plstitch_eval.predict import (
    END_OF_STREAM,
    LOW_DELAY,
    Captured,
    LiveReader,
    LiveSource,
    PredictOptions,
    StopRequest,
    VideoSource,
    is_live,
    live_name,
    load_probe_encoder,
    parse_input_options,
    predict_online,
)
from plstitch_eval.predict.live import STREAM_CLOCK, WALL_CLOCK
from plstitch_eval.predict.live_margin import live_margin
from plstitch_eval.probes import load_probe
from plstitch_eval.utils.sender import free_port, wait_udp_listener
from tests.eval.predict.conftest import CPU, VIDEO, invoke, one_error_line, read_csv, video_file
from tests.media import X264_FAST, write_video

HOST = "127.0.0.1"
GOP = {**X264_FAST, "g": "25", "keyint_min": "25"}  # a keyframe every second, as a live encoder sends


@pytest.fixture(scope="module")
def live_video(data, tmp_path_factory) -> Path:
    """The test video re-encoded with a keyframe every second (a receiver joins a stream at a keyframe)."""
    with av.open(str(video_file(data))) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    return write_video(tmp_path_factory.mktemp("live") / f"{VIDEO}.mp4", frames, fps=25, options=GOP)


@pytest.fixture(scope="module")
def offline(data, live_video, tmp_path_factory) -> dict[float, dict[str, str]]:
    """The offline CSV rows of the live video, by frame time."""
    out = tmp_path_factory.mktemp("offline")
    result = invoke("predict", "--probe", data["probe"], live_video, "--out", out, *CPU)
    assert result.exit_code == 0, result.output
    _, rows = read_csv(out / f"{VIDEO}.csv")
    return {round(float(row["time_s"]), 6): row for row in rows}


@pytest.fixture(scope="module")
def model(data):
    probe = load_probe(data["probe"])
    return probe, load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0))


def sender(video: Path, url: str, *args: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "plstitch_eval.utils.sender", str(video), url, *args]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def receive(model, source: LiveSource, started=None, stop=None) -> tuple[object, list[dict]]:
    """Predict a live source in a thread (as a service would); the prediction and its JSON lines."""
    probe, encoder = model
    stop = stop if stop is not None else StopRequest()
    rows: list[dict] = []
    result: dict[str, object] = {}

    def run() -> None:
        try:
            result["prediction"] = predict_online(
                probe, encoder, VideoSource(live_name(source.address), None, live=source),
                emit=lambda update: None, stop=stop, on_frame=rows.append,
            )  # fmt: skip
        except BaseException as exc:  # handed to the test
            result["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    if started is not None:
        started()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the live prediction did not end"
    if "error" in result:
        raise result["error"]  # type: ignore[misc]
    return result["prediction"], rows


def check_equal_offline(rows: list[dict], offline: dict[float, dict[str, str]], at_least: int) -> None:
    """Every streamed frame is an offline frame of the same time (the stream's own timestamps), with the
    same class and probabilities; the frame indices count from the first frame received."""
    assert len(rows) >= at_least, rows
    assert [r["frame_index"] for r in rows] == list(range(len(rows)))
    for row in rows:
        expected = offline[round(row["time_s"], 6)]
        assert row["predicted"] == expected["predicted"]
        for name in next(iter(offline.values())):
            if name not in ("time_s", "frame_index", "predicted", "progression"):
                assert row[name] == pytest.approx(float(expected[name]), abs=1e-5)


def test_udp_stream_predicted_as_offline(model, live_video, offline):
    port = free_port(socket.SOCK_DGRAM)
    source = LiveSource(f"udp://{HOST}:{port}", connect_timeout=3.0)
    send: list[subprocess.Popen] = []

    def start() -> None:
        wait_udp_listener(port)
        send.append(sender(live_video, source.address))

    prediction, rows = receive(model, source, start)
    assert send[0].wait(timeout=30) == 0, send[0].stderr.read()
    # the packets read while probing are kept: every sample, from the first frame
    check_equal_offline(rows, offline, at_least=len(offline))
    assert [r["frame_index"] for r in rows] == sorted(r["frame_index"] for r in rows)
    assert prediction.ended == "nothing arrived for 3 s"  # UDP has no end: the sender went quiet
    live = prediction.summary(model[0].class_names)["live"]
    assert live["clock"] == STREAM_CLOCK and live["dropped"] == 0 and live["gaps"] == []
    assert live["due"] == len(rows) and live["options"] == LOW_DELAY and "fflags" not in LOW_DELAY
    for row in rows:
        assert 0 <= row["latency_s"] < 1.0 and row["dropped"] == 0
        assert abs(row["captured_at"] - time.time()) < 60


def test_tcp_stream_through_the_cli_with_jsonl(data, live_video, offline, tmp_path):
    port = free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1")  # the sender serves, predict connects
    lines = tmp_path / "live.jsonl"
    result = invoke(
        "predict", "--probe", data["probe"], "--online", f"tcp://{HOST}:{port}", "--jsonl", lines,
        "--out", tmp_path / "out", "--json", tmp_path / "summary.json", "--connect-timeout", 10, *CPU,
    )  # fmt: skip
    assert send.wait(timeout=30) == 0, send.stderr.read()
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in lines.read_text().splitlines()]
    check_equal_offline(rows, offline, at_least=len(offline))
    skip = ("time_s", "frame_index", "predicted", "progression")  # progression: the whole video's
    names = [n for n in next(iter(offline.values())) if n not in skip]
    expected_keys = [
        "video",
        "time_s",
        "frame_index",
        "predicted",
        *names,
        "captured_at",
        "latency_s",
        "dropped",
    ]
    assert all(list(row) == expected_keys for row in rows)
    summary = json.loads((tmp_path / "summary.json").read_text())
    video = summary["videos"][0]
    assert video["ended"] == END_OF_STREAM and video["source"] == f"tcp://{HOST}:{port}"
    _, csv_rows = read_csv(tmp_path / "out" / f"tcp-{HOST}-{port}.csv")
    assert [int(r["frame_index"]) for r in csv_rows] == [r["frame_index"] for r in rows]


def test_a_pause_shorter_than_the_timeout_is_bridged(model, live_video, offline):
    port = free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1", "--pause-at", "2", "--pause-for", "1.5")
    prediction, rows = receive(model, LiveSource(f"tcp://{HOST}:{port}", connect_timeout=5.0))
    assert send.wait(timeout=30) == 0
    check_equal_offline(rows, offline, at_least=len(offline))
    assert prediction.ended == END_OF_STREAM and prediction.live["gaps"] == []
    late = [r for r in rows if r["time_s"] >= 2.0]
    early = [r for r in rows if r["time_s"] < 2.0]
    assert late and early and late[0]["captured_at"] - early[-1]["captured_at"] >= 1.4  # it did pause


def test_a_silent_stream_is_waited_for_and_the_gap_recorded(model, live_video, offline):
    port = free_port(socket.SOCK_DGRAM)
    source = LiveSource(f"udp://{HOST}:{port}", connect_timeout=1.0, reconnect_timeout=3.0)
    send: list[subprocess.Popen] = []

    def start() -> None:
        wait_udp_listener(port)
        send.append(sender(live_video, source.address, "--pause-at", "2", "--pause-for", "2.5"))

    prediction, rows = receive(model, source, start)
    assert send[0].wait(timeout=30) == 0
    gaps = prediction.live["gaps"]
    assert len(gaps) == 1 and gaps[0]["cause"] == "nothing arrived for 1 s", gaps
    assert gaps[0]["seconds"] >= 2.3 and 1.0 <= gaps[0]["after_s"] < 2.1  # the real silence: 2.5 s
    # the same connection went on, and so did the stream's clock: the file's frames and predictions
    check_equal_offline(rows, offline, at_least=len(offline))
    assert prediction.ended == "nothing arrived for 1 s; not back within 3 s"


def test_a_sender_that_stops_ends_the_video(model, live_video):
    port = free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1", "--stop-at", "2.5")
    prediction, rows = receive(model, LiveSource(f"tcp://{HOST}:{port}", connect_timeout=5.0))
    assert send.wait(timeout=30) == 0
    assert prediction.ended == END_OF_STREAM
    assert rows and max(r["time_s"] for r in rows) < 2.5
    summary = prediction.summary(model[0].class_names)
    assert summary["ended"] == END_OF_STREAM and summary["frames"] == len(rows)


def test_a_stop_request_ends_a_live_video_with_what_was_seen(model, live_video):
    """Ctrl-C or SIGTERM (here the flag they set) ends a stream that would go on: the frames seen are kept."""
    port = free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1", "--loops", "5")
    stop = StopRequest()

    def ask_to_stop() -> None:
        time.sleep(3.0)
        stop.requested = True

    started = time.monotonic()
    prediction, rows = receive(model, LiveSource(f"tcp://{HOST}:{port}"), ask_to_stop, stop)
    assert time.monotonic() - started < 6.0  # not the 29 s the stream lasts
    send.kill()
    send.wait()
    assert prediction.ended == "interrupted" and rows and prediction.frames == len(rows)


@pytest.mark.parametrize("scheme", ["tcp", "udp"])
def test_a_source_that_never_connects_is_one_line_within_the_timeout(data, model, scheme):
    kind = socket.SOCK_STREAM if scheme == "tcp" else socket.SOCK_DGRAM
    address = f"{scheme}://{HOST}:{free_port(kind)}"
    started = time.monotonic()
    with pytest.raises(DecodeError) as caught:
        receive(model, LiveSource(address, connect_timeout=1.5))
    assert time.monotonic() - started < 1.5 + 1.0  # the timeout, and a last attempt's slack
    assert str(caught.value).startswith(f"{address}: nothing arrived within --connect-timeout 1.5 s")
    assert "Exit" not in str(caught.value) and "Immediate" not in str(caught.value)  # no FFmpeg internals
    result = invoke("predict", "--probe", data["probe"], "--online", address, "--connect-timeout", 1, *CPU)
    line = one_error_line(result)
    assert address in line and "check the address" in line


def test_a_model_slower_than_the_stream_drops_frames_with_flat_latency(model, live_video, monkeypatch):
    probe, encoder = model
    slow = encoder.encode

    def encode_slowly(crops):
        time.sleep(0.8)  # slower than the probe's 2 fps
        return slow(crops)

    monkeypatch.setattr(encoder, "encode", encode_slowly)
    port = free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1", "--loops", "2")
    prediction, rows = receive(model, LiveSource(f"tcp://{HOST}:{port}", connect_timeout=5.0))
    assert send.wait(timeout=30) == 0
    live = prediction.live
    assert live["dropped"] > 0 and live["due"] == len(rows) + live["dropped"], live
    assert rows[-1]["dropped"] <= live["dropped"] and rows[-1]["dropped"] > 0
    latencies = [r["latency_s"] for r in rows]
    # the encode and at most one sample interval waited; a reader that queued every frame would lag ~6 s
    # by the end (22 samples due, 14 encoded)
    assert max(latencies) < 2.0
    half = len(latencies) // 2
    assert np.mean(latencies[half:]) < np.mean(latencies[:half]) + 0.3  # flat: no growing lag
    assert live["kept_up"] == pytest.approx(len(rows) / live["due"], abs=1e-6)


def test_a_device_input_format_lavfi(data, tmp_path):
    """Any FFmpeg input format (here lavfi's test source, as v4l2 for a capture card) with its clock."""
    address = "testsrc2=size=64x64:rate=10:duration=3,realtime"  # paced as a camera is
    assert is_live(address, "lavfi") and not is_live(address)
    result = invoke(
        "predict", "--probe", data["probe"], "--online", address, "--input-format", "lavfi",
        "--jsonl", "-", "--json", tmp_path / "s.json", *CPU,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["frame_index"] for r in rows] == list(range(6))  # 3 s at 2 fps
    # the low-delay probe may take the very first frame: the first sample is the first frame received
    assert rows[0]["time_s"] < 0.5
    assert [r["time_s"] for r in rows[1:]] == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.5])
    video = json.loads((tmp_path / "s.json").read_text())["videos"][0]
    assert video["live"]["input_format"] == "lavfi" and video["live"]["clock"] == STREAM_CLOCK
    assert "latency=" in result.stderr  # the per-second lines went to stderr


def test_a_stream_without_timestamps_is_sampled_by_the_wall_clock():
    reader = LiveReader(LiveSource("udp://127.0.0.1:9"), fps=2.0)
    frame = av.VideoFrame.from_ndarray(np.zeros((16, 16, 3), np.uint8), format="rgb24")
    frame.pts = None

    class Stream:
        time_base = None
        start_time = None

    assert reader._time_of(frame, Stream(), now=100.0) == 0.0
    assert reader._time_of(frame, Stream(), now=101.25) == pytest.approx(1.25)
    assert reader.clock == WALL_CLOCK


def test_live_margin_is_found_on_the_first_seconds_and_held_frames_go_on():
    image = np.zeros((40, 60, 3), np.uint8)
    image[4:36, 10:50] = 200  # a picture inside a black border

    def sample(i: int) -> Captured:
        return Captured(DecodedFrame(i, i * 0.5, image.copy()), captured=float(i), captured_at=float(i))

    samples = iter([sample(i) for i in range(20)])
    stream, plan, record = live_margin(samples, plan=_plan(), seconds=2.0)
    box = MarginBox.from_dict(record)
    assert (box.top, box.bottom, box.left, box.right) == pytest.approx((0.1, 0.9, 10 / 60, 50 / 60))
    assert plan.margin == box and record["found_on_frames"] == 5 and record["found_on_s"] == 2.0
    assert [s.frame.index for s in stream] == list(range(20))  # held ones first, then the rest, in order


def _plan():
    from plstitch_eval.preprocess import FramePlan

    return FramePlan(2.0, 32, (32, 32), "bicubic", (0.5,) * 3, (0.5,) * 3, crop_black_margin=True)


def test_live_settings_and_refusals(data):
    assert is_live("rtsp://scope/live") and is_live("srt://10.0.0.2:9000") and is_live("/dev/video0")
    assert not is_live("recording.ts") and not is_live("-")
    assert live_name("udp://127.0.0.1:5000?pkt_size=1316") == "udp-127.0.0.1-5000"
    assert live_name("/dev/video2") == "video2"
    rtsp = LiveSource("rtsp://scope/live", options={"fflags": "genpts"})
    assert rtsp.av_options() == {**LOW_DELAY, "rtsp_transport": "tcp", "fflags": "genpts"}
    assert LiveSource("/dev/video0").format == "v4l2"
    assert parse_input_options(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_input_options(["nothing"])
    with pytest.raises(ConfigError, match="--connect-timeout must be > 0"):
        LiveSource("udp://x:1", connect_timeout=0)
    probe = data["probe"]
    for args, says in [
        (("udp://127.0.0.1:5000", "--out", "o"), "udp://127.0.0.1:5000 is a live source"),
        ((str(video_file(data)), "--out", "o", "--jsonl", "x.jsonl"), "--jsonl goes with --online"),
        ((str(video_file(data)), "--out", "o", "--connect-timeout", "3"), "--connect-timeout goes with"),
        (("udp://h:1", "--online", "--input-option", "bad"), "--input-option 'bad' is not KEY=VALUE"),
        (("udp://h:1", "--online", "--jsonl", "-", "--json", "-"), "would share stdout"),
    ]:
        line = one_error_line(invoke("predict", "--probe", probe, *args))
        assert says in line, line


def test_jsonl_of_a_file_is_its_csv_row_by_row(data, tmp_path):
    lines = tmp_path / "rows.jsonl"
    result = invoke(
        "predict", "--probe", data["probe"], "--online", video_file(data), "--jsonl", lines,
        "--out", tmp_path / "out", *CPU,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in lines.read_text().splitlines()]
    _, csv_rows = read_csv(tmp_path / "out" / f"{VIDEO}.csv")
    assert len(rows) == len(csv_rows)
    for row, expected in zip(rows, csv_rows, strict=True):
        assert row["predicted"] == expected["predicted"] and row["dropped"] == 0
        assert row["frame_index"] == int(expected["frame_index"])
        probabilities = [v for k, v in row.items() if k in expected and k not in ("time_s", "frame_index")]
        assert sum(p for p in probabilities if isinstance(p, float)) == pytest.approx(1.0, abs=1e-5)
    again = invoke("predict", "--probe", data["probe"], "--online", video_file(data), "--jsonl", lines, *CPU)
    assert "exists; pass --overwrite" in one_error_line(again)


def test_torch_is_not_needed_to_send():
    """The sender imports no model code (it stands in for a tower, started in its own process)."""
    code = "import sys, plstitch_eval.utils.sender; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert torch is not None


def test_a_non_causal_probe_is_refused_live_with_how_to_save_a_causal_one(data, tmp_path):
    from tests.eval.predict.test_online import _temporal_probe

    probe = _temporal_probe(data, tmp_path / "tcn", causal=False)
    address = f"udp://{HOST}:{free_port(socket.SOCK_DGRAM)}"
    started = time.monotonic()
    line = one_error_line(
        invoke("predict", "--probe", probe, "--online", address, "--connect-timeout", 30, *CPU)
    )
    assert "is not causal" in line and "plstitch temporal --causal --save DIR" in line
    assert time.monotonic() - started < 30  # refused before waiting for the stream
