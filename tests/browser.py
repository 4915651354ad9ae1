"""A real headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON
messages ended by NUL on file descriptors 3 and 4), with no client library: open a page, evaluate JavaScript
in it while it runs, take a screenshot. Tests skip where no Chromium is installed."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def need_chromium() -> str:
    path = chromium_path()
    if path is None:
        pytest.skip("no chromium on PATH (apt-get install chromium; .ci/run installs it)")
    return path


def _high(fd: int) -> int:
    """`fd` moved to 10 or above (non-inheritable), so mapping the child's 3 and 4 cannot clobber it."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class Browser:
    """One headless Chromium; `open(url)` a page, then `evaluate(js)` in it and `screenshot(path)`."""

    def __init__(self, executable: str) -> None:
        to_browser_r, self._to_browser = (_high(fd) for fd in os.pipe())
        self._from_browser, from_browser_w = (_high(fd) for fd in os.pipe())

        def child_pipes() -> None:  # the browser reads fd 3 and writes fd 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.process = subprocess.Popen(
            [executable, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
             "--remote-debugging-pipe", "--window-size=1280,800", "about:blank"],
            preexec_fn=child_pipes, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.session: str | None = None

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> dict:
        """Send one command (to the page's session once one is open) and wait for its answer."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for reply in self._read():
                if reply.get("id") == self._next_id:
                    if "error" in reply:
                        raise RuntimeError(f"{method}: {reply['error']}")
                    return reply.get("result", {})
        raise TimeoutError(f"chromium did not answer {method} within {timeout} s")

    def _read(self) -> list[dict]:
        chunk = os.read(self._from_browser, 1 << 20)
        if not chunk:
            raise RuntimeError("chromium closed its pipe")
        self._buffer += chunk
        *messages, self._buffer = self._buffer.split(b"\0")
        return [json.loads(m) for m in messages if m]

    def open(self, url: str) -> None:
        target = self.call("Target.createTarget", {"url": url})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 20.0) -> Any:
        """Evaluate until the value is truthy; the value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"{expression!r} stayed false for {timeout} s")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.process.kill()
        self.process.wait(timeout=10)
        os.close(self._to_browser)
        os.close(self._from_browser)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
