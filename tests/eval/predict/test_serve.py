"""The live page (`predict --online --serve`, `predict.serve`): served by Starlette/uvicorn on loopback,
pushed by Server-Sent Events, shown in a real headless Chromium while a real stream plays; the token; slow
viewers dropped without slowing the model; one line for bad input."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.predict.serve import CaseState, LivePage, serve_settings
from plstitch_eval.utils.sender import free_port
from tests.browser import Browser, need_chromium
from tests.eval.predict.conftest import CPU, invoke, one_error_line
from tests.eval.predict.test_live import HOST, live_video, sender  # noqa: F401 - live_video: a fixture

pytest.importorskip("starlette", reason="the serve extra (pip install 'plstitch[serve]') is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (pip install 'plstitch[serve]') is not installed")


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _row(i: int, phase: str, latency: float = 0.02) -> dict:
    return {"video": "v", "time_s": i * 0.5, "predicted": phase, "A": 0.6, "B": 0.4, "latency_s": latency,
            "dropped": 0}  # fmt: skip


def test_serve_address_and_token():
    assert serve_settings("127.0.0.1:8765").token is None
    assert serve_settings("8765").host == "127.0.0.1"
    wide = serve_settings("0.0.0.0:8765")
    assert wide.generated and len(wide.token) >= 16 and wide.url.endswith(f"?token={wide.token}")
    assert serve_settings("10.0.0.5:80", "a-token-of-20-chars!").token == "a-token-of-20-chars!"
    for bad in ("here:port", "1.2.3.4:99999"):
        with pytest.raises(ConfigError, match="give HOST:PORT"):
            serve_settings(bad)
    with pytest.raises(ConfigError, match="at least 16"):
        serve_settings("127.0.0.1:1", "short")


def test_case_state_ribbon_and_latency_against_a_plain_count():
    phases = list("AAABBBBAAB")
    latencies = [0.01 * (i + 1) for i in range(len(phases))]
    state = CaseState(["A", "B"], [], "src")
    for i, (phase, latency) in enumerate(zip(phases, latencies, strict=True)):
        event = state.add(_row(i, phase, latency))
    # independent: runs of equal phases, each ending where the next begins (the last at its last frame)
    runs, start = [], 0
    for i in range(1, len(phases) + 1):
        if i == len(phases) or phases[i] != phases[start]:
            runs.append([start * 0.5, min(i, len(phases) - 1) * 0.5, "AB".index(phases[start])])
            start = i
    assert state.snapshot()["segments"] == runs
    ordered = sorted(latencies)
    assert event["latency_p50_s"] == pytest.approx((ordered[4] + ordered[5]) / 2, abs=1e-4)
    assert ordered[-2] <= event["latency_p99_s"] <= ordered[-1]
    assert event["probabilities"] == {"A": 0.6, "B": 0.4} and event["frames"] == len(phases)


def test_token_refuses_page_state_and_events():
    page = LivePage(serve_settings(f"127.0.0.2:{free_port(socket.SOCK_STREAM)}"), CaseState(["A"], [], "s"))
    assert page.settings.generated  # not 127.0.0.1: a token is needed, and made
    page.start()
    try:
        base = f"http://127.0.0.2:{page.port}"
        for path in ("/", "/state", "/events"):
            status, text = _get(base + path)
            assert status == 403 and "token" in text
            assert _get(f"{base}{path}?token=wrong-{page.settings.token}")[0] == 403
        status, text = _get(f"{base}/?token={page.settings.token}")
        assert status == 200 and "<title>plstitch live</title>" in text
        assert "http://" not in text and "https://" not in text  # no CDN, nothing fetched from elsewhere
    finally:
        page.close()


def test_a_viewer_that_never_reads_is_dropped_and_never_slows_the_model():
    page = LivePage(serve_settings("127.0.0.1:0"), CaseState(["A", "B"], [], "s"))
    page.start()
    stalled = socket.create_connection(("127.0.0.1", page.port))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        stalled.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")  # and never reads a byte
        deadline = time.monotonic() + 10
        while not page.viewers and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(page.viewers) == 1
        for i in range(20000):  # each publish hands over and returns: the model's loop runs to its end
            page.publish(_row(i, "AB"[i % 2]))
        deadline = time.monotonic() + 10
        while page.dropped_viewers == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert page.dropped_viewers == 1 and page.viewers == []
        status, text = _get(f"http://127.0.0.1:{page.port}/state")  # the page still serves others
        assert status == 200 and json.loads(text)["last"]["frames"] == 20000
    finally:
        stalled.close()
        page.close()


def test_live_page_in_chromium_follows_the_stream(data, live_video, tmp_path):  # noqa: F811
    chromium = need_chromium()
    port, page_port = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1", "--loops", "4")
    lines = tmp_path / "live.jsonl"
    result: dict = {}

    def run() -> None:
        result["cli"] = invoke(
            "predict", "--probe", data["probe"], "--online", f"tcp://{HOST}:{port}", "--jsonl", lines,
            "--serve", f"127.0.0.1:{page_port}", "--connect-timeout", 10, *CPU,
        )  # fmt: skip

    thread = threading.Thread(target=run)
    thread.start()
    url = f"http://127.0.0.1:{page_port}/"
    deadline = time.monotonic() + 60
    while _get_quietly(url) != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    checks = 0
    with Browser(chromium) as browser:
        browser.open(url)
        browser.wait_for("Number(document.body.dataset.updates) > 0")
        while thread.is_alive() and checks < 5:
            shown = browser.evaluate(
                "({phase: document.body.dataset.phase, link: document.body.dataset.link,"
                " time: document.getElementById('elapsed').textContent})"
            )
            now = time.time()
            rows = [json.loads(line) for line in lines.read_text().splitlines() if line.endswith("}")]
            recent = [r for r in rows if r["captured_at"] >= now - 1.0]
            if shown["link"] == "connected" and recent:
                # the page shows the phase of a frame predicted within the last second
                assert shown["phase"] in {r["predicted"] for r in recent}, (shown, recent)
                checks += 1
            time.sleep(0.4)
        browser.screenshot(tmp_path / "live-page.png")
        thread.join(timeout=60)
        send.wait(timeout=30)
        assert browser.wait_for("document.body.dataset.link === 'ended'", timeout=10)
        ended = browser.evaluate("document.getElementById('link').textContent")
    assert checks >= 2, "the stream ended before the page was seen following it"
    assert result["cli"].exit_code == 0, result["cli"].output
    assert ended.startswith("case ended")
    assert (tmp_path / "live-page.png").stat().st_size > 5000


def _get_quietly(url: str) -> int | None:
    try:
        return _get(url)[0]
    except OSError:
        return None


def test_serve_refusals_are_one_line(data, tmp_path):
    video = data["root"] / "videos" / "video05.mp4"
    cases = {
        (video, "--serve", "127.0.0.1:8765", "--out", tmp_path): "--serve goes with --online",
        ("--online", video, "--serve", "nowhere"): "give HOST:PORT",
    }
    for args, message in cases.items():
        result = invoke("predict", "--probe", data["probe"], *args, *CPU)
        assert result.exit_code != 0
        assert message in one_error_line(result)
