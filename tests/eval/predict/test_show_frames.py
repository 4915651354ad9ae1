"""`predict --online --serve --show-frames` (`predict.serve`): the newest video frame on the live page as a
downscaled JPEG (`/frame.jpg`), under the page's token, never without the option; shown in a real headless
Chromium."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
import urllib.error
import urllib.request

import av
import numpy as np
import pytest

from plstitch_eval.predict.serve import FRAME_SIDE, CaseState, LivePage, serve_settings
from plstitch_eval.utils.sender import free_port
from tests.browser import Browser, need_chromium
from tests.eval.predict.conftest import CPU, invoke, one_error_line, video_file
from tests.eval.predict.test_live import HOST, live_video, sender  # noqa: F401 - live_video: a fixture

pytest.importorskip("starlette", reason="the serve extra (pip install 'plstitch[serve]') is not installed")
pytest.importorskip("uvicorn", reason="the serve extra (pip install 'plstitch[serve]') is not installed")


def _get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read(), response.headers.get("content-type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), ""


def _row(i: int) -> dict:
    return {"video": "v", "time_s": i * 0.5, "predicted": "AB"[i % 2], "A": 0.6, "B": 0.4, "latency_s": 0.01}


def _picture(height: int, width: int) -> np.ndarray:
    """Left half red, right half blue: the JPEG must keep the two halves where they were."""
    image = np.zeros((height, width, 3), np.uint8)
    image[:, : width // 2, 0] = 220
    image[:, width // 2 :, 2] = 220
    return image


def test_frame_needs_the_token_and_is_a_downscaled_jpeg():
    from PIL import Image

    page = LivePage(
        serve_settings(f"127.0.0.2:{free_port(socket.SOCK_STREAM)}", show_frames=True),
        CaseState(["A"], [], "s"),
    )
    page.start()
    try:
        base = f"http://127.0.0.2:{page.port}/frame.jpg"
        assert _get(base)[0] == 403  # not loopback: the token is needed for the frame too
        status, body, _ = _get(f"{base}?token={page.settings.token}")
        assert status == 404 and b"no frame yet" in body
        page.show(_picture(720, 1280))
        status, body, kind = _get(f"{base}?token={page.settings.token}")
        assert status == 200 and kind == "image/jpeg"
        shown = np.asarray(Image.open(io.BytesIO(body)).convert("RGB"), np.float64)
        assert shown.shape == (FRAME_SIDE * 720 // 1280, FRAME_SIDE, 3)  # longer side FRAME_SIDE, aspect kept
        left, right = shown[:, : FRAME_SIDE // 2 - 8], shown[:, FRAME_SIDE // 2 + 8 :]
        assert abs(left[..., 0].mean() - 220) < 8 and left[..., 2].mean() < 8
        assert abs(right[..., 2].mean() - 220) < 8 and right[..., 0].mean() < 8
    finally:
        page.close()


def test_no_frame_without_show_frames():
    page = LivePage(serve_settings("127.0.0.1:0"), CaseState(["A"], [], "s"))
    page.start()
    try:
        page.show(_picture(64, 64))
        assert page.picture is None  # not even kept
        status, body, _ = _get(f"http://127.0.0.1:{page.port}/frame.jpg")
        assert status == 404 and b"--show-frames" in body
        assert page.state.snapshot()["show_frames"] is False
    finally:
        page.close()


def test_show_frames_needs_serve(data, tmp_path):
    done = invoke("predict", "--probe", data["probe"], "--online", video_file(data), "--show-frames", *CPU)
    assert "--show-frames goes with --serve" in one_error_line(done)


def test_page_in_chromium_shows_the_frame_only_when_asked(tmp_path):
    chromium = need_chromium()
    shown = {}
    for show in (True, False):
        page = LivePage(serve_settings("127.0.0.1:0", show_frames=show), CaseState(["A", "B"], [], "s"))
        page.start()
        stop = threading.Event()

        def model(page: LivePage = page, stop: threading.Event = stop) -> None:  # a frame and row per 50 ms
            i = 0
            while not stop.is_set():
                page.show(_picture(240, 320))
                page.publish(_row(i))
                i += 1
                time.sleep(0.05)

        thread = threading.Thread(target=model)
        thread.start()
        try:
            with Browser(chromium) as browser:
                browser.open(page.url)
                browser.wait_for("Number(document.body.dataset.updates) > 5")
                if show:
                    browser.wait_for("Number(document.body.dataset.shownFrames) > 1", timeout=10)
                    browser.screenshot(tmp_path / "frames-page.png")
                else:
                    time.sleep(1.0)
                shown[show] = browser.evaluate(
                    "({hidden: document.getElementById('frame').hidden,"
                    " width: document.getElementById('frame').naturalWidth,"
                    " fetched: Number(document.body.dataset.shownFrames || 0)})"
                )
        finally:
            stop.set()
            thread.join()
            page.close()
    assert shown[True]["hidden"] is False and shown[True]["width"] == 320
    assert shown[False] == {"hidden": True, "width": 0, "fetched": 0}
    assert (tmp_path / "frames-page.png").stat().st_size > 5000


def test_online_hands_each_predicted_frame_to_the_page(data):
    from plstitch_eval.predict import PredictOptions, VideoSource, load_probe_encoder, predict_online
    from plstitch_eval.probes import load_probe

    probe = load_probe(data["probe"])
    model = load_probe_encoder(probe, PredictOptions(device="cpu", num_workers=0, progression=False))
    images: list[np.ndarray] = []
    prediction = predict_online(
        probe, model, VideoSource("v", video_file(data)), lambda _: None, on_image=images.append
    )
    assert len(images) == prediction.frames > 5
    assert all(image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3 for image in images)
    assert len({image.tobytes() for image in images}) > 1  # each frame its own picture, not one kept


@pytest.mark.parametrize("show", [True, False])
def test_command_serves_the_newest_frame_only_with_show_frames(data, live_video, show):  # noqa: F811
    """`plstitch predict --online tcp://... --serve 127.0.0.1:PORT [--show-frames]` while a loopback stream
    plays: /frame.jpg is a JPEG of a decoded frame (longer side FRAME_SIDE at most, the stream's aspect),
    and 404 without the flag."""
    from PIL import Image

    port, page_port = free_port(socket.SOCK_STREAM), free_port(socket.SOCK_STREAM)
    send = sender(live_video, f"tcp://{HOST}:{port}?listen=1", "--loops", "2")
    result: dict = {}
    flags = ["--show-frames"] if show else []

    def run() -> None:
        result["cli"] = invoke(
            "predict", "--probe", data["probe"], "--online", f"tcp://{HOST}:{port}",
            "--serve", f"127.0.0.1:{page_port}", *flags, "--connect-timeout", 10, *CPU,
        )  # fmt: skip

    thread = threading.Thread(target=run)
    thread.start()
    try:
        url, seen = f"http://127.0.0.1:{page_port}", None
        deadline = time.monotonic() + 60
        while thread.is_alive() and time.monotonic() < deadline:
            try:
                if json.loads(_get(f"{url}/state")[1])["last"]:  # a frame was predicted
                    seen = _get(f"{url}/frame.jpg")
                    break
            except OSError:  # the page is not up yet
                pass
            time.sleep(0.1)
    finally:
        thread.join(timeout=90)
        send.wait(timeout=30)
    assert result["cli"].exit_code == 0, result["cli"].output
    assert seen is not None, "no frame was predicted while the stream played"
    status, body, kind = seen
    if not show:
        assert status == 404 and b"--show-frames" in body
        return
    assert status == 200 and kind == "image/jpeg"
    with av.open(str(live_video)) as container:
        height, width = container.streams.video[0].height, container.streams.video[0].width
    shown = Image.open(io.BytesIO(body))
    assert shown.format == "JPEG" and max(shown.size) <= FRAME_SIDE
    assert abs(shown.size[0] / shown.size[1] - width / height) < 0.05  # the stream's aspect kept
    assert np.asarray(shown.convert("RGB")).std() > 1  # a picture, not a blank
