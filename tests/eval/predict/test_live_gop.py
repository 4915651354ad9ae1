"""A live stream of the synthetic set's videos as they are (libx264 defaults: a keyframe every 10 s), sent by
the README's recipe (`python -m plstitch_eval.utils.sender VIDEO URL` into `predict --online URL`) over
loopback UDP and TCP with the default options: every second is predicted from the first frame on, and a causal
temporal probe gives the offline probabilities; a 5 s pause is recorded as the silence it was; a receiver that
joins between two keyframes says so in one line."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import av
import pytest
import torch

from plstitch_eval.data.synthetic import generate_synthetic
from plstitch_eval.predict import LiveSource, PredictOptions, load_probe_encoder
from plstitch_eval.probes import load_probe
from plstitch_eval.utils.sender import free_port, wait_udp_listener
from tests.eval.predict.conftest import CPU, invoke, one_error_line, read_csv
from tests.eval.predict.test_live import receive, sender
from tests.eval.predict.test_online import _temporal_probe

HOST = "127.0.0.1"
SECONDS = 20.0  # two GOPs of the synthetic set's encoder: keyframes at 0 and 10 s


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The model on one thread, as docs/predict.md advises on a busy CPU: with two threads fighting other
    processes for two cores, the tiny model took 0.4 s a frame here and the first samples were dropped
    (which a temporal probe's prefix then lacks)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def gop_video(tmp_path_factory) -> Path:
    """A synthetic-set video as the generator writes it, 20 s long (its keyframes 10 s apart)."""
    root = tmp_path_factory.mktemp("gop10")
    generate_synthetic(root, n_videos=1, size=64, seed=3, min_seconds=SECONDS, max_seconds=SECONDS, workers=1)
    video = root / "videos" / "video01.mp4"
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        keyframes = [float(p.pts * stream.time_base) for p in container.demux(stream) if p.is_keyframe]
    assert keyframes == [0.0, 10.0]
    return video


@pytest.fixture(scope="module")
def causal_probe(data, tmp_path_factory) -> Path:
    return _temporal_probe(data, tmp_path_factory.mktemp("tcn") / "tcn", causal=True)


@pytest.fixture(scope="module")
def offline(causal_probe, gop_video, tmp_path_factory) -> dict[float, dict[str, str]]:
    """The offline CSV rows of the 20 s video by the causal probe, by frame time."""
    out = tmp_path_factory.mktemp("offline")
    result = invoke("predict", "--probe", causal_probe, gop_video, "--out", out, *CPU)
    assert result.exit_code == 0, result.output
    _, rows = read_csv(out / f"{gop_video.stem}.csv")
    assert len(rows) == 2 * SECONDS  # 2 fps
    return {round(float(row["time_s"]), 6): row for row in rows}


def equal_offline(rows: list[dict], offline: dict[float, dict[str, str]]) -> None:
    """The live rows are the offline ones: every frame, the same times, classes and probabilities."""
    assert [row["time_s"] for row in rows] == pytest.approx(list(offline))
    for row in rows:
        expected = offline[round(row["time_s"], 6)]
        assert row["predicted"] == expected["predicted"], row["time_s"]
        for name, value in expected.items():
            if name not in ("time_s", "frame_index", "predicted", "progression"):
                assert row[name] == pytest.approx(float(value), abs=1e-5), (row["time_s"], name)


@pytest.mark.parametrize("scheme", ["udp", "tcp"])
def test_the_readme_recipe_predicts_every_second_of_a_10_s_gop_stream_as_offline(
    scheme, causal_probe, gop_video, offline, tmp_path
):
    kind = socket.SOCK_DGRAM if scheme == "udp" else socket.SOCK_STREAM
    port = free_port(kind)
    address = f"{scheme}://{HOST}:{port}"
    send: list[subprocess.Popen] = []
    if scheme == "tcp":  # the sender serves, predict connects
        send.append(sender(gop_video, f"{address}?listen=1"))
        timeout: list[str] = []  # the defaults: the sender's end ends the video
    else:  # predict binds the port, then the sender sends to it
        timeout = ["--connect-timeout", "3"]  # UDP has no end: the video ends 3 s after the sender's

        def start() -> None:
            wait_udp_listener(port)
            send.append(sender(gop_video, address))

        threading.Thread(target=start, daemon=True).start()
    lines = tmp_path / "live.jsonl"
    result = invoke(
        "predict", "--probe", causal_probe, "--online", address, *timeout, "--jsonl", lines,
        "--json", tmp_path / "summary.json", *CPU,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert send[0].wait(timeout=30) == 0, send[0].stderr.read()
    rows = [json.loads(line) for line in lines.read_text().splitlines()]
    equal_offline(rows, offline)
    seconds = [line.split()[0] for line in result.stdout.splitlines() if "latency=" in line]
    assert seconds == [f"{s:.1f}" for s in range(int(SECONDS))]  # every second, from 0 on
    live = json.loads((tmp_path / "summary.json").read_text())["videos"][0]["live"]
    assert "fflags" not in live["options"] and live["gaps"] == [] and live["dropped"] == 0


def test_a_5_s_pause_is_a_gap_of_the_real_silence_and_the_stream_clock_goes_on(
    data, gop_video, causal_probe, offline
):
    port = free_port(socket.SOCK_DGRAM)
    source = LiveSource(f"udp://{HOST}:{port}", connect_timeout=2.0, reconnect_timeout=4.0)
    send: list[subprocess.Popen] = []

    def start() -> None:
        wait_udp_listener(port)
        send.append(
            sender(gop_video, source.address, "--pause-at", "3", "--pause-for", "5", "--stop-at", "6")
        )

    probe = load_probe(causal_probe)
    model = (probe, load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0)))
    prediction, rows = receive(model, source, start)
    assert send[0].wait(timeout=30) == 0, send[0].stderr.read()
    gaps = prediction.live["gaps"]
    assert len(gaps) == 1 and gaps[0]["cause"] == "nothing arrived for 2 s", gaps
    assert 4.5 <= gaps[0]["seconds"] < 8.0  # the 5 s the sender was silent, not the connect timeout
    assert 2.5 <= gaps[0]["after_s"] < 3.1
    # the sender went on where it was: the stream's clock did, so the times and predictions are the file's
    equal_offline(rows, {t: row for t, row in offline.items() if t < 6.0})
    before = [r for r in rows if r["time_s"] <= gaps[0]["after_s"]]
    after = [r for r in rows if r["time_s"] > gaps[0]["after_s"]]
    assert before and after and after[0]["captured_at"] - before[-1]["captured_at"] >= 4.5  # it did pause
    assert prediction.ended == "nothing arrived for 2 s; not back within 4 s"


def test_joining_between_two_keyframes_says_no_keyframe_yet_in_one_line(causal_probe, gop_video):
    port = free_port(socket.SOCK_DGRAM)
    address = f"udp://{HOST}:{port}"
    send = sender(gop_video, address, "--stop-at", "8")  # sending before anyone listens
    try:
        assert send.stdout.readline().strip() == "sending"
        time.sleep(0.5)  # past the first keyframe; the next one is 10 s into the stream
        started = time.monotonic()
        result = invoke("predict", "--probe", causal_probe, "--online", address, "--connect-timeout", 2, *CPU)
        line = one_error_line(result)
    finally:
        send.kill()
        send.wait()
    assert f"{address}: packets arrive but no keyframe came within --connect-timeout 2 s" in line
    assert "raise --connect-timeout" in line and "nothing arrived" not in line and "Exit" not in line
    assert time.monotonic() - started < 8.0  # not the next keyframe's 10 s
