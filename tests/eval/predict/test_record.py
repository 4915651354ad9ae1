"""`predict --online --record FILE` (`predict.record`): a real MPEG-TS/H.264 stream over loopback TCP is
written to FILE as it arrives, remuxed; predicting the recording offline gives the live run's frames, times
and classes; a kill -9 leaves a readable file; an existing FILE and a wrong use are one line each."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

from plstitch_eval.predict.record import RECORD_FORMATS, Recorder
from plstitch_eval.utils.sender import free_port
from tests.eval.predict.conftest import CPU, invoke, one_error_line, read_csv
from tests.eval.predict.test_live import HOST, live_video, sender  # noqa: F401 - live_video: a fixture


def _frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


@pytest.mark.parametrize("suffix", [".mkv", ".ts"])
def test_recording_predicts_again_as_it_was_predicted_live(data, live_video, tmp_path, suffix):  # noqa: F811
    port = free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1")
    recording, lines = tmp_path / f"case{suffix}", tmp_path / "live.jsonl"
    result = invoke(
        "predict", "--probe", data["probe"], "--online", f"tcp://{HOST}:{port}", "--record", recording,
        "--jsonl", lines, "--json", tmp_path / "summary.json", "--connect-timeout", 10, *CPU,
    )  # fmt: skip
    assert send.wait(timeout=30) == 0, send.stderr.read()
    assert result.exit_code == 0, result.output
    # remuxed, not re-encoded: every picture of the recording is the sent video's, bit for bit
    sent, recorded = _frames(live_video), _frames(recording)
    assert len(recorded) == len(sent)
    assert all(np.array_equal(a, b) for a, b in zip(sent, recorded, strict=True))
    info = json.loads((tmp_path / "summary.json").read_text())["videos"][0]["live"]["recording"]
    assert info["path"] == str(recording) and info["format"] == RECORD_FORMATS[suffix][0]
    assert info["packets"] == len(sent) and info["ended"] == "end of stream"
    # predicted again offline: the live run's frame times and classes
    offline = invoke("predict", "--probe", data["probe"], recording, "--out", tmp_path / "again", *CPU)
    assert offline.exit_code == 0, offline.output
    _, rows = read_csv(tmp_path / "again" / "case.csv")
    live_rows = [json.loads(line) for line in lines.read_text().splitlines()]
    again = {round(float(r["time_s"]), 6): r["predicted"] for r in rows}
    # a busy machine drops live frames (the newest is kept): every live frame is a frame of the recording,
    # with the same class, and the recording holds every frame that was due - predicted or dropped
    assert {round(r["time_s"], 6): r["predicted"] for r in live_rows}.items() <= again.items()
    assert len(again) == len(live_rows) + live_rows[-1]["dropped"]


def test_a_killed_run_leaves_a_readable_recording(data, live_video, tmp_path):  # noqa: F811
    port = free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1", "--loops", "8")
    recording, lines = tmp_path / "case.mkv", tmp_path / "live.jsonl"
    command = [
        sys.executable, "-m", "plstitch_eval", "predict", "--probe", str(data["probe"]), "--online",
        f"tcp://{HOST}:{port}", "--record", str(recording), "--jsonl", str(lines), *CPU,
    ]  # fmt: skip
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180  # a busy machine starts python and torch slowly
    while time.monotonic() < deadline and (not lines.exists() or len(lines.read_text().splitlines()) < 4):
        time.sleep(0.1)
    seen = len(lines.read_text().splitlines()) if lines.exists() else 0
    assert run.poll() is None, run.stderr.read()  # still predicting: the kill lands mid-stream
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=10)
    send.kill()
    send.wait(timeout=10)
    assert seen >= 4, run.stderr.read()
    frames = _frames(recording)  # no trailer was written: readable all the same
    sent = _frames(live_video)
    assert len(frames) >= seen  # at least the frames predicted before the kill (sampled at 2 fps of 25)
    assert all(np.array_equal(a, b) for a, b in zip(sent, frames, strict=False))


def test_recorder_starts_at_a_keyframe_and_stops_at_a_new_connection(live_video, tmp_path):  # noqa: F811
    recorder = Recorder(tmp_path / "r.ts")
    with av.open(str(live_video)) as first, av.open(str(live_video)) as second:
        packets = list(first.demux(first.streams.video[0]))
        for packet in packets[1:]:  # joined after the first keyframe: skipped up to the next one (GOP 25)
            recorder.write(packet, first.streams.video[0])
        for packet in second.demux(second.streams.video[0]):  # a reconnection: a new stream
            recorder.write(packet, second.streams.video[0])
        recorder.close()
    sized = [p for p in packets if p.size]
    assert recorder.skipped == 24 and recorder.packets == len(sized) - 25
    assert recorder.record()["ended"].startswith("the stream reconnected")
    assert len(_frames(tmp_path / "r.ts")) == len(sized) - 25


def test_record_refusals_are_one_line(data, tmp_path):
    probe = ["predict", "--probe", data["probe"]]
    taken = tmp_path / "taken.mkv"
    taken.write_bytes(b"earlier case")
    address = f"tcp://{HOST}:{free_port(socket.SOCK_STREAM)}"
    video = data["root"] / "videos" / "video05.mp4"
    cases = {
        ("--online", address, "--record", taken): "exists; name another file, or give --overwrite",
        ("--online", address, "--record", tmp_path / "case.avi"): "record to a .mkv, .ts, .mp4 file",
        ("--online", address, "--record", tmp_path / "no" / "case.mkv"): "does not exist; create it first",
        (video, "--record", tmp_path / "case.mkv", "--out", tmp_path): "--record goes with --online",
        ("--online", address, address, "--record", tmp_path / "c.mkv"): "records one live source",
        ("--online", video, "--record", tmp_path / "c.mkv"): "records one live source",
    }
    for args, message in cases.items():
        result = invoke(*probe, *args, *CPU)
        assert result.exit_code != 0
        line = one_error_line(result)
        assert message in line, line
    assert taken.read_bytes() == b"earlier case"
