"""Online prediction of a recording still being written (`predict --online FILE` follows it until quiet) and
Ctrl-C or SIGTERM while following a file or a pipe (the frames seen are written, one line on stderr, exit 130
or 143).

The recordings are real MPEG-TS (the synthetic H.264 video remuxed), written by a thread in small pieces.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import typer

from plstitch_eval.cli import app
from plstitch_eval.predict import (
    PredictOptions,
    VideoSource,
    load_probe_encoder,
    predict_online,
    predict_videos,
    write_prediction,
)
from plstitch_eval.predict.online import (
    END_OF_RECORDING,
    INTERRUPTED,
    TERMINATED,
    PolledReader,
    StopNow,
    StopRequest,
    follows,
    quiet_for,
)
from plstitch_eval.probes import load_probe
from tests.eval.predict.conftest import CPU, VIDEO, invoke, read_csv, video_file
from tests.media import remux

REPO = Path(__file__).resolve().parents[3]
CHUNK = 4096  # bytes a piece, as a recorder flushing small pieces
PAUSE_S = 0.1


class Recorder(threading.Thread):
    """Writes `data` into `path` `CHUNK` bytes at a time, `PAUSE_S` apart; only its first `upto` bytes when
    given (then it stays silent, as a recorder that stalled)."""

    def __init__(self, path: Path, data: bytes, upto: int | None = None) -> None:
        super().__init__(daemon=True)
        self.path, self.data, self.upto = path, data, len(data) if upto is None else upto
        self.last_write = time.monotonic()
        path.write_bytes(b"")

    def run(self) -> None:
        with self.path.open("ab") as handle:
            for start in range(0, self.upto, CHUNK):
                handle.write(self.data[start : min(start + CHUNK, self.upto)])
                handle.flush()
                self.last_write = time.monotonic()
                time.sleep(PAUSE_S)


@pytest.fixture(scope="module")
def recording(data, tmp_path_factory) -> Path:
    """The test video as a finished MPEG-TS file (the bytes a recorder writes)."""
    return remux(video_file(data), tmp_path_factory.mktemp("ts") / f"{VIDEO}.ts", fmt="mpegts")


@pytest.fixture(scope="module")
def model(data):
    probe = load_probe(data["probe"])
    return probe, load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0))


def _first_part(recording: Path, seconds: float) -> int:
    """About the bytes of the 6 s recording's first `seconds`, in whole pieces (a synthetic video spreads
    its bytes evenly enough over time)."""
    size = recording.stat().st_size
    return max(CHUNK, int(size * seconds / 6.0) // CHUNK * CHUNK)


# --------------------------------------------------------------------------------------- which files follow


def test_a_recent_streamable_file_is_followed_a_finished_or_mp4_one_is_not(data, recording, tmp_path):
    fresh = tmp_path / "fresh.ts"
    fresh.write_bytes(recording.read_bytes())
    assert follows(fresh, 10.0)
    assert not follows(fresh, 0.0)  # --follow-timeout 0: never
    old = time.time() - 60
    os.utime(fresh, (old, old))
    assert not follows(fresh, 10.0)  # quiet for 60 s: it has ended
    mp4 = tmp_path / "fresh.mp4"
    mp4.write_bytes(video_file(data).read_bytes())
    assert not follows(mp4, 10.0)  # an MP4's index comes last: it cannot be read while written
    assert not follows(None, 10.0)  # a pipe blocks by itself


# ------------------------------------------------------------------------------------------------ the reader


def test_the_reader_waits_at_a_growing_files_end_until_quiet(recording, tmp_path):
    blob = recording.read_bytes()
    path = tmp_path / "growing.ts"
    writer = Recorder(path, blob)
    writer.start()
    with path.open("rb") as handle:
        time.sleep(2 * PAUSE_S)
        unfollowed = PolledReader(handle, StopRequest()).read(len(blob))
    assert 0 < len(unfollowed) < len(blob) and blob.startswith(unfollowed)  # today's end, no waiting
    with path.open("rb") as handle:
        reader = PolledReader(handle, StopRequest(), follow_s=0.5)
        pieces = []
        while piece := reader.read(65536):
            pieces.append(piece)
        quiet_at = time.monotonic()
    assert b"".join(pieces) == blob  # every byte, although the reader was faster than the writer
    assert reader.ended == quiet_for(0.5) == "quiet for 0.5 s"
    assert 0.5 - 0.05 <= quiet_at - writer.last_write < 0.5 + 1.0  # mtime: a coarse clock


def test_ctrl_c_ends_a_silent_pipe_within_a_poll(tmp_path):
    read_end, write_end = os.pipe()
    stop = StopRequest()
    try:
        with os.fdopen(read_end, "rb", buffering=0) as pipe:
            reader = PolledReader(pipe, stop)
            os.write(write_end, b"abc")
            assert reader.read(10) == b"abc"
            threading.Timer(0.3, lambda: setattr(stop, "requested", True)).start()
            asked = time.monotonic()
            assert reader.read(10) == b""  # the writer holds the pipe open, silent
            assert time.monotonic() - asked < 0.3 + 1.0 and reader.ended == INTERRUPTED
    finally:
        os.close(write_end)


def test_the_first_ctrl_c_asks_to_stop_a_second_stops_at_once():
    with StopRequest() as stop:
        assert signal.getsignal(signal.SIGINT) == stop.handle
        stop.handle(signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            stop.handle(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_sigterm_asks_to_stop_as_ctrl_c_does_and_is_told_apart():
    before = signal.getsignal(signal.SIGTERM)
    with StopRequest() as stop:
        assert signal.getsignal(signal.SIGTERM) == stop.handle
        assert stop.reason == INTERRUPTED  # a stop asked by hand reads as Ctrl-C
        stop.handle(signal.SIGTERM)
        assert stop.requested and stop.signum == signal.SIGTERM and stop.reason == TERMINATED
        with pytest.raises(StopNow) as second:
            stop.handle(signal.SIGTERM)
        assert isinstance(second.value, KeyboardInterrupt) and second.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) == before  # put back


def test_a_keyboard_interrupt_in_the_read_callback_ends_the_stream():
    class Interrupted:
        def read(self, size: int) -> bytes:
            raise KeyboardInterrupt  # what a second Ctrl-C raises: PyAV's callback would swallow it

    stop = StopRequest()
    reader = PolledReader(Interrupted(), stop)
    assert reader.read(10) == b"" and stop.requested and reader.ended == INTERRUPTED


# ---------------------------------------------------------------------------------------- followed videos


def test_predict_online_follows_a_growing_recording_to_its_end(data, recording, tmp_path):
    path = tmp_path / "growing.ts"
    writer = Recorder(path, recording.read_bytes())
    writer.start()
    time.sleep(3 * PAUSE_S)  # a recording under way
    result = invoke(
        "predict", "--probe", data["probe"], "--online", path, "--out", tmp_path / "out",
        "--follow-timeout", 1.5, "--json", tmp_path / "summary.json", *CPU,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not writer.is_alive()
    video = json.loads((tmp_path / "summary.json").read_text())["videos"][0]
    assert video["ended"] == "quiet for 1.5 s"

    finished = invoke("predict", "--probe", data["probe"], recording, "--out", tmp_path / "offline", *CPU)
    assert finished.exit_code == 0, finished.output
    _, rows = read_csv(tmp_path / "offline" / f"{VIDEO}.csv")
    _, followed = read_csv(tmp_path / "out" / "growing.csv")
    assert len(rows) == 12 and video["frames"] == len(followed)  # a 6 s video at 2 fps: all of it
    assert [(r["time_s"], r["predicted"]) for r in followed] == [(r["time_s"], r["predicted"]) for r in rows]
    assert len(result.stdout.splitlines()) == 6 and video["last_time_s"] == pytest.approx(5.5, abs=0.05)


def test_frames_are_predicted_while_the_recording_grows(model, recording, tmp_path):
    probe, encoder = model
    path = tmp_path / "growing.ts"
    writer = Recorder(path, recording.read_bytes())
    writer.start()
    time.sleep(3 * PAUSE_S)
    arrivals: list[float] = []
    source = VideoSource("growing", path)
    followed = predict_online(
        probe, encoder, source, lambda _: arrivals.append(time.monotonic()), follow_s=1.0
    )
    assert not writer.is_alive() and followed.ended == "quiet for 1 s"
    assert arrivals[0] < writer.last_write - 1.0  # the first second was out well before the last byte came
    whole = predict_online(probe, encoder, VideoSource("whole", recording), lambda _: None)  # read to its end
    assert whole.ended == END_OF_RECORDING and whole.frames == followed.frames == 12
    np.testing.assert_array_equal(followed.frame_times, whole.frame_times)
    np.testing.assert_array_equal(followed.probabilities, whole.probabilities)  # the same frames, decoded
    np.testing.assert_array_equal(followed.predicted, whole.predicted)


def test_a_stalled_recording_ends_after_the_quiet_period(model, recording, tmp_path):
    probe, encoder = model
    path = tmp_path / "stalled.ts"
    writer = Recorder(path, recording.read_bytes(), upto=_first_part(recording, 3.0))
    writer.start()
    time.sleep(3 * PAUSE_S)
    updates = []
    prediction = predict_online(probe, encoder, VideoSource("stalled", path), updates.append, follow_s=1.0)
    ended_at = time.monotonic()
    writer.join()
    assert prediction.ended == quiet_for(1.0)
    assert 1.0 - 0.05 <= ended_at - writer.last_write < 1.0 + 4.0  # waited for the quiet period, then ended
    assert 2 <= prediction.frames < 12 and len(updates) >= 1  # a part of the 6 s video
    assert prediction.summary(probe.class_names)["ended"] == "quiet for 1 s"


def test_a_finished_recording_is_read_to_its_end_at_once(data, recording, tmp_path):
    path = tmp_path / "finished.ts"
    path.write_bytes(recording.read_bytes())
    old = time.time() - 60
    os.utime(path, (old, old))
    result = invoke("predict", "--probe", data["probe"], "--online", path, "--json", "-", *CPU)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert summary["videos"][0]["ended"] == END_OF_RECORDING and summary["videos"][0]["frames"] == 12
    assert summary["interrupted"] is False and summary["signal"] is None
    assert summary["videos"][0]["black_margin"] is None


def test_the_follow_timeouts_default_in_the_help_is_the_options():
    command = typer.main.get_command(app)
    (param,) = [p for p in command.commands["predict"].params if p.name == "follow_timeout"]
    found = re.search(r"\(default (\d+)\)", param.help)
    assert found and float(found.group(1)) == PredictOptions().follow_timeout == 10.0, param.help
    assert param.default is None


def test_follow_timeout_is_checked_and_goes_with_online(data, tmp_path):
    for args, message in (
        (["--online", "--follow-timeout", "-1"], "--follow-timeout must be >= 0"),
        (["--follow-timeout", "3", "--out", tmp_path], "--follow-timeout goes with --online"),
    ):
        result = invoke("predict", "--probe", data["probe"], video_file(data), *args, *CPU)
        assert result.exit_code == 1 and message in result.stderr, result.output
        assert "Traceback" not in result.output


# ------------------------------------------------------------------------------------------------- Ctrl-C

INTERRUPTED_LINE = re.compile(r"^interrupted at (\d+\.\d) s of video \(stdin\); wrote (\S+) and (\S+)$")
TERMINATED_LINE = re.compile(r"^terminated at (\d+\.\d) s of video \((\S+)\); wrote (\S+) and (\S+)$")


def _predict_online(args: list, tmp_path: Path, **popen) -> list:
    """`plstitch -q predict --online ...` in its own process (JSON to tmp_path/summary.json), and its stdout
    lines as a reader thread collects them."""
    command = [
        sys.executable, "-m", "plstitch_eval", "-q", "predict", "--json", str(tmp_path / "summary.json"),
        *map(str, args), *CPU,
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=REPO, **popen
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.decode() for line in process.stdout))
    reader.start()
    return [process, lines, reader]


def _wait_for_lines(process: subprocess.Popen, lines: list[str], count: int = 2) -> None:
    deadline = time.monotonic() + 60
    while len(lines) < count and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(lines) >= count, process.stderr.read().decode() if process.poll() is not None else "no line"


def _signal_and_wait(
    process: subprocess.Popen, reader: threading.Thread, signum: int
) -> tuple[int, float, str]:
    """Send `signum`, wait (at most 20 s) for the exit: its code, the seconds it took and its stderr."""
    process.send_signal(signum)
    asked = time.monotonic()
    try:
        code = process.wait(timeout=20)
    finally:
        process.kill()
    stopped_in = time.monotonic() - asked
    reader.join(5)
    return code, stopped_in, process.stderr.read().decode()


def _one_line_said(stderr: str, pattern: re.Pattern) -> re.Match:
    """The stop's single stderr line, matched by `pattern`; no traceback."""
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    said = [line for line in stderr.splitlines() if line.strip()]
    assert len(said) == 1, stderr
    match = pattern.match(said[0])
    assert match, said[0]
    return match


def _rows_of_what_was_seen(csv: Path, png: Path, stopped_at: str, lines: list[str]) -> list[dict]:
    """The CSV's rows: the last at the time the stop line names, one per printed line with its phase."""
    _, rows = read_csv(csv)
    assert png.stat().st_size > 0
    assert float(rows[-1]["time_s"]) == pytest.approx(float(stopped_at), abs=0.051)
    by_time = {f"{float(r['time_s']):.1f}": r["predicted"] for r in rows}
    for line in lines:  # every line printed has its row, with the same phase
        time_s, _, phase = line.split()[:3]
        assert by_time[time_s] == phase
    return rows


def test_ctrl_c_on_a_pipe_writes_what_was_seen_and_exits_130(data, recording, tmp_path):
    """`tail -f rec.ts | plstitch predict --online -`: the pipe stays open; SIGINT reaches predict alone."""
    out = tmp_path / "out"
    args = ["--probe", data["probe"], "--online", "-", "--out", out]
    process, lines, reader = _predict_online(args, tmp_path, stdin=subprocess.PIPE)
    blob = recording.read_bytes()
    process.stdin.write(blob[: _first_part(recording, 4.0)])  # about 4 s of the video; the pipe stays open
    process.stdin.flush()
    _wait_for_lines(process, lines)
    time.sleep(0.5)
    code, stopped_in, stderr = _signal_and_wait(process, reader, signal.SIGINT)
    process.stdin.close()
    assert code == 130, stderr
    assert stopped_in < 10.0, stopped_in
    match = _one_line_said(stderr, INTERRUPTED_LINE)
    assert match.group(2) == str(out / "stdin.csv") and match.group(3) == str(out / "stdin.png")
    rows = _rows_of_what_was_seen(out / "stdin.csv", out / "stdin.png", match.group(1), lines)
    assert len(rows) < 12  # only what came before Ctrl-C
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["videos"][0]["ended"] == INTERRUPTED
    assert summary["signal"] == "SIGINT"
    assert summary["videos"][0]["frames"] == len(rows)


def test_sigterm_on_a_followed_recording_writes_what_was_seen_and_exits_143(data, recording, tmp_path):
    """`timeout` or a service manager stops `predict --online rec.ts` while it waits for the recorder: SIGTERM
    ends it as Ctrl-C does (CSV and figure of the frames seen), says "terminated at N s" and exits 143."""
    path, out = tmp_path / "growing.ts", tmp_path / "out"
    writer = Recorder(path, recording.read_bytes(), upto=_first_part(recording, 4.0))  # then it stalls
    writer.start()
    time.sleep(3 * PAUSE_S)  # a recording under way
    args = ["--probe", data["probe"], "--online", path, "--follow-timeout", "120", "--out", out]
    process, lines, reader = _predict_online(args, tmp_path)
    _wait_for_lines(process, lines)
    writer.join()
    time.sleep(0.5)  # predict now waits at the end of the stalled file (for up to 120 s)
    code, stopped_in, stderr = _signal_and_wait(process, reader, signal.SIGTERM)
    assert code == 143, stderr
    assert stopped_in < 10.0, stopped_in
    match = _one_line_said(stderr, TERMINATED_LINE)
    assert match.group(2) == str(path)
    assert match.group(3) == str(out / "growing.csv") and match.group(4) == str(out / "growing.png")
    rows = _rows_of_what_was_seen(out / "growing.csv", out / "growing.png", match.group(1), lines)
    assert 2 <= len(rows) < 12  # what the recorder had written, not the whole 6 s video
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["signal"] == "SIGTERM"
    assert summary["videos"][0]["ended"] == TERMINATED and summary["videos"][0]["frames"] == len(rows)


@pytest.mark.parametrize(
    ("signum", "code", "verb"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")]
)
def test_a_second_signal_stops_at_once_with_its_exit_code(data, tmp_path, monkeypatch, signum, code, verb):
    """A second Ctrl-C or SIGTERM (`StopNow`) leaves predict where it is: one line, 128 + the signal."""
    import plstitch_eval.predict.session as predict_package

    def stopped_twice(*_args, **_kwargs):
        raise StopNow(signum)

    monkeypatch.setattr(predict_package, "run_online", stopped_twice)
    out = tmp_path / "out"
    result = invoke("predict", "--probe", data["probe"], "--online", video_file(data), "--out", out, *CPU)
    assert result.exit_code == code, result.output
    said = [line for line in result.stderr.splitlines() if line.strip()]
    assert said[
        -1
    ] == f"{verb} twice: stopped at once, the video in hand is not written; {out} holds the " + (
        "videos that had ended"
    ), result.stderr
    assert "Traceback" not in result.output


def test_ctrl_c_after_the_first_frame_keeps_it(data, model, tmp_path):
    probe, encoder = model
    stop = StopRequest()  # set by hand, as SIGINT's handler does
    source = VideoSource(VIDEO, video_file(data))
    prediction = predict_online(probe, encoder, source, lambda _: setattr(stop, "requested", True), stop=stop)
    assert prediction.frames == 1 and prediction.ended == INTERRUPTED and prediction.last_time == 0.0
    files = write_prediction(prediction, probe, tmp_path, "one frame")
    _, rows = read_csv(Path(files["csv"]))
    assert len(rows) == 1 and rows[0]["predicted"] == probe.class_names[prediction.predicted[0]]
    assert Path(files["png"]).stat().st_size > 0


# ------------------------------------------------------------------------------- online equals offline


def test_online_predictions_equal_offline_probabilities_within_1e_6(data, model, tmp_path):
    """Online encodes one frame at a time, offline batches of 64: CPU kernels take other paths, so the
    features differ in the last bits (up to ~1e-7 seen); the classes are the same."""
    probe, encoder = model
    source = VideoSource(VIDEO, video_file(data))
    offline = predict_videos(probe, encoder, [source], tmp_path / "out", PredictOptions(num_workers=0))
    online = predict_online(probe, encoder, source, lambda update: None)
    whole = offline.predictions[0]
    np.testing.assert_array_equal(online.frame_times, whole.frame_times)
    np.testing.assert_array_equal(online.predicted, whole.predicted)
    np.testing.assert_allclose(online.probabilities, whole.probabilities, rtol=0, atol=1e-6)
