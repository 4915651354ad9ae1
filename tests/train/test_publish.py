"""push-to-hub with HfApi.create_repo / upload_folder patched: exact folder uploaded, no token leaks."""

from __future__ import annotations

import logging
import shutil
import socket
from pathlib import Path
from typing import Any

import httpx2  # huggingface_hub's HTTP client (for a realistic error object)
import pytest
import timm
import torch
from huggingface_hub import HfApi, constants
from huggingface_hub.errors import HfHubHTTPError
from safetensors.torch import load_file, save_file
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import PublishError
from plstitch_train.publishing.export import export_model
from plstitch_train.publishing.publish import list_upload_files, push_to_hub
from tests.train.test_export import EXPECTED_FILES, make_results, make_run_dir

SECRET = "hf_TESTsecretTOKEN0123456789abcdef"


@pytest.fixture(scope="module")
def exported_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("publish")
    run, _, _ = make_run_dir(root)
    results = make_results(root / "knn.json", weights=run / "backbone" / "model.safetensors")
    return export_model(run, root / "tiny-plstitch", [results])


@pytest.fixture
def folder(exported_dir: Path, tmp_path: Path) -> Path:
    """A private copy per test, so tests may add or break files."""
    return Path(shutil.copytree(exported_dir, tmp_path / "tiny-plstitch"))


@pytest.fixture
def hub_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """Record HfApi network calls; upload_folder snapshots the files it would send."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def create_repo(self: HfApi, **kwargs: Any) -> str:
        calls.append(("create_repo", {**kwargs, "api_token": self.token}))
        return f"https://huggingface.co/{kwargs['repo_id']}"

    def upload_folder(self: HfApi, **kwargs: Any) -> Any:
        root = Path(kwargs["folder_path"])
        sent = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}
        calls.append(("upload_folder", {**kwargs, "api_token": self.token, "sent": sent}))
        return "https://huggingface.co/me/tiny/commit/0123"

    def unexpected(self: HfApi, **kwargs: Any) -> None:
        raise AssertionError(f"unexpected network call with {kwargs}")

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    monkeypatch.setattr(HfApi, "create_branch", unexpected)
    return calls


@pytest.fixture
def no_login(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No token in the environment and an empty login cache (real huggingface_hub lookup)."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE"):
        monkeypatch.delenv(name, raising=False)
    token_path = tmp_path / "hf_home" / "token"
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(token_path))
    return token_path


def test_push_uploads_exactly_the_exported_folder(folder, hub_calls, monkeypatch, caplog) -> None:
    monkeypatch.setenv("HF_TOKEN", SECRET)
    caplog.set_level(logging.DEBUG)
    result = CliRunner().invoke(
        app, ["push-to-hub", str(folder), "--repo-id", "me/tiny", "--private", "--commit-message", "first"]
    )
    assert result.exit_code == 0, result.output
    assert [name for name, _ in hub_calls] == ["create_repo", "upload_folder"]
    repo = hub_calls[0][1]
    assert repo["repo_id"] == "me/tiny" and repo["private"] is True and repo["exist_ok"] is True
    upload = hub_calls[1][1]
    assert Path(upload["folder_path"]) == folder
    assert upload["revision"] == "main" and upload["commit_message"] == "first"
    assert set(upload["allow_patterns"]) == EXPECTED_FILES
    assert set(upload["sent"]) == EXPECTED_FILES
    assert upload["sent"]["model.safetensors"] == (folder / "model.safetensors").read_bytes()
    assert repo["api_token"] == SECRET and upload["api_token"] == SECRET
    assert SECRET not in result.output and SECRET not in caplog.text
    assert "commit/0123" in result.stdout


def test_token_from_the_login_cache(folder, hub_calls, no_login) -> None:
    no_login.parent.mkdir(parents=True)
    no_login.write_text(SECRET)
    result = push_to_hub(folder, "me/tiny")
    assert result.commit_url and not result.dry_run
    assert hub_calls[1][1]["api_token"] == SECRET


def test_dry_run_lists_files_and_uploads_nothing(folder, hub_calls, no_login) -> None:
    result = CliRunner().invoke(app, ["push-to-hub", str(folder), "--repo-id", "me/tiny", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert hub_calls == []
    for item in list_upload_files(folder):
        assert item.path in result.stdout
    weights_kib = (folder / "model.safetensors").stat().st_size / 1024
    assert f"{weights_kib:.1f} KiB" in result.stdout


@pytest.mark.parametrize("name", ["model.pth", "extra/optimizer.ckpt", "weights.bin"])
def test_pickle_files_are_refused(folder, hub_calls, name) -> None:
    target = folder / name
    target.parent.mkdir(exist_ok=True)
    torch.save({"w": torch.zeros(1)}, target)
    with pytest.raises(PublishError, match=name.split("/")[-1]):
        push_to_hub(folder, "me/tiny", token=SECRET)
    result = CliRunner().invoke(app, ["push-to-hub", str(folder), "--repo-id", "me/tiny", "--dry-run"])
    assert result.exit_code == 1 and "pickle" in result.output
    assert hub_calls == []


def test_missing_token_names_the_fix(folder, hub_calls, no_login) -> None:
    with pytest.raises(PublishError, match="hf auth login.*HF_TOKEN"):
        push_to_hub(folder, "me/tiny")
    assert hub_calls == []


def test_folder_that_does_not_load_is_refused(folder, hub_calls) -> None:
    state = load_file(str(folder / "model.safetensors"))
    state.pop("norm.weight")
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(PublishError, match="does not load|does not match"):
        push_to_hub(folder, "me/tiny", token=SECRET)
    assert hub_calls == []


def test_bad_repo_id_and_missing_folder(folder, tmp_path) -> None:
    with pytest.raises(PublishError, match="ORG/NAME"):
        push_to_hub(folder, "no-org", dry_run=True)
    with pytest.raises(PublishError, match="not a folder"):
        push_to_hub(tmp_path / "missing", "me/tiny", dry_run=True)


def test_hub_errors_become_one_line_without_the_token(folder, monkeypatch) -> None:
    def failing_create_repo(self: HfApi, **kwargs: Any) -> None:
        request = httpx2.Request("POST", "https://huggingface.co/api/repos/create")
        response = httpx2.Response(401, request=request)
        raise HfHubHTTPError(f"401 Client Error: invalid credentials {SECRET}", response=response)

    monkeypatch.setattr(HfApi, "create_repo", failing_create_repo)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    result = CliRunner().invoke(app, ["push-to-hub", str(folder), "--repo-id", "me/tiny"])
    assert result.exit_code == 1
    assert "401 Client Error" in result.output and "write access" in result.output
    assert SECRET not in result.output


def test_uploaded_files_load_with_timm_hf_hub(folder, hub_calls, monkeypatch, tmp_path) -> None:
    """Put exactly what upload_folder received into an offline Hub cache; plain timm loads it by repo id."""
    push_to_hub(folder, "me/tiny", token=SECRET)
    sent = hub_calls[1][1]["sent"]
    commit = "0123456789abcdef0123456789abcdef01234567"
    cache = tmp_path / "hub"
    snapshot = cache / "models--me--tiny" / "snapshots" / commit
    for name, data in sent.items():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_bytes(data)
    (cache / "models--me--tiny" / "refs").mkdir()
    (cache / "models--me--tiny" / "refs" / "main").write_text(commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    from_hub = timm.create_model("hf-hub:me/tiny", pretrained=True).eval()
    local = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(from_hub(images), local(images))


# --- no network, another endpoint, offline mode: one line naming the host and the fix ---------------------


def _push_cli(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[str]]:
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    result = CliRunner().invoke(app, ["push-to-hub", str(folder), "--repo-id", "me/m"])
    return result, result.stderr.strip().splitlines()


@pytest.mark.parametrize("endpoint", [None, "https://hub.example.org"])
def test_no_network_is_one_line_naming_the_host(folder, monkeypatch, endpoint) -> None:
    """huggingface_hub 2.x lets httpx2's ConnectError (DNS failure) out of create_repo unwrapped."""
    if endpoint:
        monkeypatch.setattr(constants, "ENDPOINT", endpoint)  # what HF_ENDPOINT sets

    def unreachable(self: HfApi, **kwargs: Any) -> None:
        request = httpx2.Request("POST", f"{self.endpoint}/api/repos/create")
        raise httpx2.ConnectError("[Errno -2] Name or service not known", request=request)

    monkeypatch.setattr(HfApi, "create_repo", unreachable)
    result, lines = _push_cli(folder, monkeypatch)
    assert result.exit_code == 1 and result.stdout == ""
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    host = "hub.example.org" if endpoint else "huggingface.co"
    assert f"Cannot reach {host} to upload" in lines[0] and "me/m" in lines[0]
    assert "Name or service not known" in lines[0]
    assert "network" in lines[0] and "HF_ENDPOINT" in lines[0] and "HF_TOKEN" in lines[0]


def test_refused_connection_without_any_mock_is_one_line(folder, monkeypatch) -> None:
    """The real client against a closed local port (HF_ENDPOINT pointing at nothing): no patching at all."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    result, lines = _push_cli(folder, monkeypatch)
    assert result.exit_code == 1
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "Cannot reach 127.0.0.1 to upload" in lines[0] and "ConnectError" in lines[0]


def test_offline_mode_is_one_line_naming_the_setting(folder, monkeypatch) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # HF_HUB_OFFLINE=1: the client refuses to connect
    result, lines = _push_cli(folder, monkeypatch)
    assert result.exit_code == 1
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "offline mode is on (HF_HUB_OFFLINE=1)" in lines[0] and "huggingface.co" in lines[0]
    assert "unset HF_HUB_OFFLINE" in lines[0]
