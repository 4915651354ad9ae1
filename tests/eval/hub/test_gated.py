"""A gated Hub repo (DINOv3's facebook/* repos) gives one line: accept the licence on the Hub, set HF_TOKEN.

No test reaches the network: the Hub's answer is either a `GatedRepoError` raised by patched huggingface_hub
functions, or a local server answering 403 with the `X-Error-Code: GatedRepo` header the Hub sends.
"""

from __future__ import annotations

import http.server
import threading

import httpx2
import huggingface_hub
import pytest
from huggingface_hub import errors as hf_errors
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import ModelNotFoundError
from plstitch_eval.hub import load_encoder
from plstitch_eval.hub.hub_files import HubUnreachableError, fetch_file
from plstitch_eval.hub.registry import MODELS
from tests.eval.hub.test_offline_fetch import _point_hub_at

runner = CliRunner()
ENTRY = "dinov3-vitb16-facebook"
REPO = "facebook/dinov3-vitb16-pretrain-lvd1689m"


def _gated_error(method: str, url: str) -> hf_errors.GatedRepoError:
    """What huggingface_hub raises for a 403 with `X-Error-Code: GatedRepo` (its `hf_raise_for_status`)."""
    response = httpx2.Response(
        403, headers={"X-Error-Code": "GatedRepo"}, request=httpx2.Request(method, url)
    )
    return hf_errors.GatedRepoError(
        f"403 Client Error.\n\nCannot access gated repo for url {url}.", response=response
    )


@pytest.fixture
def gated_hub(tmp_path, monkeypatch):
    """An online Hub whose every file answer for REPO is 'gated' (HEAD and download alike)."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))
    calls = []

    def head(url, **kwargs):
        calls.append(("HEAD", url))
        raise _gated_error("HEAD", url)

    def download(repo_id, filename, **kwargs):
        calls.append(("GET", repo_id, filename))
        raise _gated_error("GET", huggingface_hub.hf_hub_url(repo_id, filename))

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", head)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    return calls


def _check_line(message: str, fix: str) -> None:
    assert "\n" not in message and "Traceback" not in message
    assert REPO in message and "model.safetensors" in message and "is gated" in message
    assert f"https://huggingface.co/{REPO}" in message and "accept the licence" in message
    assert "HF_TOKEN" in message and fix in message


def test_download_of_a_gated_repo_is_one_line(gated_hub):
    assert MODELS[ENTRY].gated and MODELS[ENTRY].repo_id == REPO
    result = runner.invoke(app, ["download", ENTRY])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ")
    _check_line(lines[0], "run this download again")
    assert ("GET", REPO, "model.safetensors") in gated_hub  # it was the download that was refused


def test_loading_a_gated_entry_names_the_download_command(gated_hub):
    with pytest.raises(ModelNotFoundError) as info:
        load_encoder(ENTRY)
    assert not isinstance(info.value, HubUnreachableError)  # the Hub answered: not a network problem
    _check_line(str(info.value), f"`plstitch download {ENTRY}`")


def test_other_refusals_keep_their_own_message(tmp_path, monkeypatch):
    """A 404 is not a licence question: the gated line is for GatedRepoError only."""
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "cache"))

    def missing(*args, **kwargs):
        url = "https://huggingface.co/org/model/resolve/main/w.pth"
        raise hf_errors.RemoteEntryNotFoundError(
            "404 Client Error.", response=httpx2.Response(404, request=httpx2.Request("HEAD", url))
        )

    monkeypatch.setattr(huggingface_hub, "get_hf_file_metadata", missing)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", missing)
    with pytest.raises(ModelNotFoundError) as info:
        fetch_file("org/model", "w.pth")
    assert "is gated" not in str(info.value) and "check the repo id" in str(info.value)


class _Gated(http.server.BaseHTTPRequestHandler):
    """Answers as the Hub does for a gated repo the caller has no access to."""

    def do_HEAD(self):
        self.send_response(403)
        self.send_header("X-Error-Code", "GatedRepo")
        self.send_header("X-Error-Message", "Access to model is restricted. You must have access to it.")
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args):
        pass


def test_a_real_gated_answer_through_huggingface_hub(tmp_path, monkeypatch):
    """huggingface_hub's own HTTP client and error mapping, against a local server: the same one line."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Gated)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_port}"
    try:
        _point_hub_at(monkeypatch, endpoint, tmp_path / "cache")
        with pytest.raises(ModelNotFoundError) as info:
            fetch_file(REPO, "model.safetensors", fix_hint="`plstitch download x`")
    finally:
        server.shutdown()
        server.server_close()
    message = str(info.value)
    assert "\n" not in message and "is gated" in message and f"{endpoint}/{REPO}" in message
    assert "HF_TOKEN" in message and "`plstitch download x`" in message
