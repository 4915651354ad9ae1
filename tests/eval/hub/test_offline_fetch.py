"""A Hub that cannot be reached fails at once with one line (no ~30 s of retry warnings), cache first."""

import http.server
import os
import socket
import subprocess
import sys
import threading

import huggingface_hub
import pytest
import torch
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import ModelNotFoundError
from plstitch_eval.hub.hub_files import HubUnreachableError, fetch_file, fetch_first

runner = CliRunner()


def _closed_port() -> int:
    """A local port nobody listens on (bound, then released): connecting to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _point_hub_at(monkeypatch, endpoint: str, cache) -> None:
    """What HF_ENDPOINT=endpoint and an empty online cache give (both constants are read at import)."""
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(
        huggingface_hub.constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        endpoint + "/{repo_id}/resolve/{revision}/{filename}",
    )
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))


def _no_download(*args, **kwargs):
    raise AssertionError("hf_hub_download (and its retry loop) must not run when the Hub is unreachable")


def test_unreachable_hub_download_is_one_line(tmp_path):
    """The real command, HF_ENDPOINT at a closed port: one error line, no "Retrying in 1s" lines."""
    port = _closed_port()
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{port}",
        "HF_HUB_OFFLINE": "0",
        "HF_HUB_CACHE": str(tmp_path / "cache"),
        "HF_HOME": str(tmp_path / "home"),
        "COLUMNS": "80",
    }
    result = subprocess.run(
        [sys.executable, "-m", "plstitch_eval", "download", "pl-stitch-lemon"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert result.returncode == 1
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "visurg/PL-Stitch" in lines[0] and "pl_lemon.pth" in lines[0]
    assert f"http://127.0.0.1:{port} cannot be reached" in lines[0] and "Fix:" in lines[0]


def test_unreachable_hub_model_is_one_line_without_retries(tmp_path, monkeypatch):
    """`--model lemonfm` (two spellings of its file): one HEAD, no download attempt, one line."""
    port = _closed_port()
    _point_hub_at(monkeypatch, f"http://127.0.0.1:{port}", tmp_path / "cache")
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", _no_download)
    args = ["extract", "--dataset", "synthetic", "--out", str(tmp_path / "out"), "--model", "lemonfm"]
    result = runner.invoke(app, args)
    assert isinstance(result.exception, SystemExit), result.exception
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "visurg/LemonFM" in lines[0] and f"127.0.0.1:{port} cannot be reached" in lines[0]
    assert "plstitch download lemonfm" in lines[0]


def test_unreachable_hub_stops_at_the_first_spelling(tmp_path, monkeypatch):
    _point_hub_at(monkeypatch, f"http://127.0.0.1:{_closed_port()}", tmp_path / "cache")
    asked = []
    real_head = huggingface_hub.get_hf_file_metadata

    def counting_head(url, **kwargs):
        asked.append(url)
        return real_head(url, **kwargs)

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", counting_head)
    with pytest.raises(HubUnreachableError):
        fetch_first("org/model", ["a.pth", "A.pth", "b.pth"])
    assert len(asked) == 1


def test_cached_file_loads_when_the_hub_is_unreachable(hf_cache, tmp_path, monkeypatch):
    snapshot, commit = hf_cache("org/model", {"w.pth": lambda p: torch.save({"w": torch.ones(1)}, p)})
    _point_hub_at(monkeypatch, f"http://127.0.0.1:{_closed_port()}", hf_cache.cache_dir)
    hub_file = fetch_file("org/model", "w.pth")
    assert hub_file.path == snapshot / "w.pth" and hub_file.commit == commit


class _NotFound(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.send_response(404)
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args):
        pass


def test_an_answering_hub_is_not_called_unreachable(tmp_path, monkeypatch):
    """A 404 from the Hub is the Hub's answer: reported as such, with the fix for a wrong name."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _point_hub_at(monkeypatch, f"http://127.0.0.1:{server.server_port}", tmp_path / "cache")
        with pytest.raises(ModelNotFoundError) as info:
            fetch_file("org/model", "absent.pth")
    finally:
        server.shutdown()
        server.server_close()
    message = str(info.value)
    assert not isinstance(info.value, HubUnreachableError)
    assert "404" in message and "absent.pth" in message and "check the repo id" in message
    assert "\n" not in message
