"""`load_temporal_head(spec)`: the authors' head from released checkpoints, registry names, folders."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from plstitch_eval.errors import CheckpointError, ModelNotFoundError
from plstitch_eval.hub import TemporalHead, load_temporal_head
from plstitch_eval.hub.ranking_head import save_temporal_head
from tests.official import (
    TINY,
    official_checkpoint,
    reference_temporal_scores,
    unwrap,
    write_official_checkpoint,
)


def test_names_and_sizes_are_the_authors() -> None:
    """hidden = D/2, ff = 4*hidden, 8 heads, 6 layers; keys reduce.0, temporal.enc.layers.i, scorer.{0,2}."""
    for dim in (768, 384):
        head = TemporalHead(dim)
        assert head.config["hidden_dim"] == dim // 2 and head.config["ff_dim"] == 2 * dim
        assert head.config["n_heads"] == 8 and head.config["n_layers"] == 6
    keys = set(TemporalHead(64, n_layers=2).state_dict())
    assert {k.split(".")[0] for k in keys} == {"reduce", "temporal", "scorer"}
    assert {k for k in keys if k.startswith("scorer.")} == {
        f"scorer.{i}.{p}" for i in (0, 2) for p in ("weight", "bias")
    }
    assert "temporal.enc.layers.1.linear1.weight" in keys and "reduce.0.weight" in keys


@pytest.mark.parametrize("layers", [1, 2])
def test_official_pth_gives_the_authors_scores(tmp_path, layers: int) -> None:
    checkpoint = write_official_checkpoint(tmp_path / "pl_tiny.pth", temporal_layers=layers)
    head = load_temporal_head(tmp_path / "pl_tiny.pth")
    assert not head.training
    assert head.config == {
        "in_dim": TINY["dim"],
        "hidden_dim": TINY["dim"] // 2,
        "n_layers": layers,
        "n_heads": 8,
        "ff_dim": 2 * TINY["dim"],
        "dropout": 0.1,
    }
    frames = torch.randn(3, 8, TINY["dim"])
    with torch.no_grad():
        expected = reference_temporal_scores(unwrap(checkpoint["temporal_head"]), frames, n_heads=8)
        torch.testing.assert_close(head(frames), expected, atol=1e-5, rtol=1e-5)


def test_registry_name_resolves_to_the_released_file(tmp_path, hf_cache) -> None:
    checkpoint = official_checkpoint()
    hf_cache("visurg/PL-Stitch", {"pl_lemon.pth": lambda path: torch.save(checkpoint, path)})
    frames = torch.randn(2, 5, TINY["dim"])
    expected = reference_temporal_scores(unwrap(checkpoint["temporal_head"]), frames)
    for spec in ("pl-stitch-lemon", "hf-hub:visurg/PL-Stitch/pl_lemon.pth"):
        with torch.no_grad():
            torch.testing.assert_close(load_temporal_head(spec)(frames), expected, atol=1e-5, rtol=1e-5)
    with pytest.raises(ModelNotFoundError):
        load_temporal_head("pl-stitch-gtea")  # not in the offline cache


def test_run_and_exported_folders_and_last_ckpt(tmp_path) -> None:
    head = TemporalHead(24, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32).eval()
    save_temporal_head(head, tmp_path / "run" / "backbone")
    frames = torch.randn(2, 6, 24)
    with torch.no_grad():
        expected = head(frames)
        for spec in (
            tmp_path / "run",
            tmp_path / "run" / "backbone",
            tmp_path / "run/backbone/temporal_head.json",
        ):
            torch.testing.assert_close(load_temporal_head(spec)(frames), expected)
    # a run folder mid-training: only the trainer's last.ckpt, heads as in its config
    state = {f"student.temporal_head.{k}": v for k, v in head.state_dict().items()}
    state["student.backbone.vit.cls_token"] = torch.zeros(1, 1, 24)
    (tmp_path / "mid").mkdir()
    torch.save({"model": state, "config": {"temporal_heads": 2}}, tmp_path / "mid" / "last.ckpt")
    with torch.no_grad():
        torch.testing.assert_close(load_temporal_head(tmp_path / "mid")(frames), expected)


def test_heads_saved_under_the_old_names_still_load(tmp_path) -> None:
    head = TemporalHead(24, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32).eval()
    save_temporal_head(head, tmp_path)
    renamed = {
        k.replace("reduce.", "input_proj.").replace("temporal.enc.", "encoder."): v
        for k, v in head.state_dict().items()
    }
    save_file(renamed, str(tmp_path / "temporal_head.safetensors"))
    frames = torch.randn(1, 4, 24)
    with torch.no_grad():
        torch.testing.assert_close(load_temporal_head(tmp_path)(frames), head(frames))
    fresh = TemporalHead(24, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32)
    fresh.load_state_dict(renamed)  # the module itself accepts them too (old run checkpoints)
    assert torch.equal(fresh.reduce[0].weight, head.reduce[0].weight)


def test_strict_errors_name_the_keys(tmp_path) -> None:
    checkpoint = official_checkpoint()
    extra = dict(
        checkpoint, temporal_head={**checkpoint["temporal_head"], "module.pos_t.weight": torch.zeros(3)}
    )
    torch.save(extra, tmp_path / "extra.pth")
    with pytest.raises(CheckpointError, match=r"unexpected \['pos_t.weight'\]"):
        load_temporal_head(tmp_path / "extra.pth")
    lost = dict(checkpoint["temporal_head"])
    lost.pop("module.scorer.2.bias")
    torch.save(dict(checkpoint, temporal_head=lost), tmp_path / "lost.pth")
    with pytest.raises(CheckpointError, match=r"missing \['scorer.2.bias'\]"):
        load_temporal_head(tmp_path / "lost.pth")
    no_head = {k: v for k, v in checkpoint.items() if k != "temporal_head"}
    torch.save(no_head, tmp_path / "no_head.pth")
    with pytest.raises(CheckpointError, match="holds no temporal head"):
        load_temporal_head(tmp_path / "no_head.pth")
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="folder without"):
        load_temporal_head(tmp_path / "empty")
    with pytest.raises(ModelNotFoundError):
        load_temporal_head(tmp_path / "nowhere")


def test_json_of_exported_folder_is_unchanged(tmp_path) -> None:
    save_temporal_head(TemporalHead(24, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32), tmp_path)
    config = json.loads((tmp_path / "temporal_head.json").read_text())
    assert config == {
        "in_dim": 24,
        "hidden_dim": 16,
        "n_layers": 1,
        "n_heads": 2,
        "ff_dim": 32,
        "dropout": 0.1,
    }


def test_hub_repo_in_our_exported_format(tmp_path, hf_cache) -> None:
    head = TemporalHead(24, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32).eval()
    save_temporal_head(head, tmp_path / "export")

    def copy(name: str):
        return lambda path: path.write_bytes((tmp_path / "export" / name).read_bytes())

    files = {name: copy(name) for name in ("temporal_head.json", "temporal_head.safetensors")}
    hf_cache("someone/plstitch-run", files)
    frames = torch.randn(1, 5, 24)
    with torch.no_grad():
        torch.testing.assert_close(load_temporal_head("hf-hub:someone/plstitch-run")(frames), head(frames))
