"""Export a tiny training run; plain timm must reload it with features identical to the teacher's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import timm
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file
from timm.models.vision_transformer import VisionTransformer
from typer.testing import CliRunner

from plstitch_eval.cli import app
from plstitch_eval.errors import ConfigError, PublishError
from plstitch_eval.hub.ranking_head import TemporalHead, load_temporal_head, save_temporal_head
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.hub.timm_format import save_timm_dir
from plstitch_eval.preprocess import DataConfig
from plstitch_train import publishing
from plstitch_train.publishing import cards, publish
from plstitch_train.publishing import export as export_module
from plstitch_train.publishing.export import ExportOptions, export_model, git_commit

TRAIN_CONFIG = {"dataset": "synthetic", "fps": 1.0, "clip_len": 8, "epochs": 1, "lr": 4e-4, "embed_dim": 32}
EXPECTED_FILES = {
    "config.json",
    "model.safetensors",
    "temporal_head.safetensors",
    "temporal_head.json",
    "plstitch.json",
    "README.md",
}


def tiny_vit() -> VisionTransformer:
    return VisionTransformer(
        img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2, num_classes=0
    ).eval()


def make_run_dir(
    root: Path, perturb_checkpoint: bool = False
) -> tuple[Path, VisionTransformer, TemporalHead]:
    """A run directory in the trainer's layout; returns (run_dir, last.ckpt's teacher, last.ckpt's head).

    last.ckpt holds the trainer's `model` state (`teacher.backbone.vit.*`, `student.temporal_head.*`, ...).
    """
    run = root / "run"
    teacher = tiny_vit()
    head = TemporalHead(in_dim=32, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32).eval()
    save_timm_dir(teacher, run / "backbone", DataConfig.for_size(32))
    save_temporal_head(head, run / "backbone")
    if perturb_checkpoint:  # the checkpoint differs from backbone/: exporting last.ckpt must take its weights
        teacher, head = tiny_vit(), TemporalHead(in_dim=32, hidden_dim=16, n_layers=1, n_heads=2, ff_dim=32)
        teacher.load_state_dict({k: v + 0.01 for k, v in run_backbone_state(run).items()})
        head.eval()
    state = teacher.state_dict()
    model_state = {
        **{f"teacher.backbone.vit.{k}": v.clone() for k, v in state.items()},
        "teacher.backbone.masked_embed": torch.zeros(1, 32),
        "teacher.ibot_head.mlp.0.weight": torch.randn(64, 32),
        **{f"student.backbone.vit.{k}": v + 1.0 for k, v in state.items()},
        "student.backbone.masked_embed": torch.zeros(1, 32),
        **{f"student.temporal_head.{k}": v.clone() for k, v in head.state_dict().items()},
    }
    checkpoint = {"format": 1, "config": TRAIN_CONFIG, "step": 2, "model": model_state, "optimizer": {}}
    torch.save(checkpoint, run / "last.ckpt")
    (run / "train_config.json").write_text(json.dumps(TRAIN_CONFIG), encoding="utf-8")
    (run / "log.jsonl").write_text(
        '{"epoch": 0, "step": 1, "loss": 2.5}\n{"epoch": 1, "step": 2, "loss": 2.0}\n'
    )
    return run, teacher, head


def run_backbone_state(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "backbone" / "model.safetensors"))


def make_results(
    path: Path, task: str = "knn", dataset: str = "cholec80", weights: Path | None = None
) -> Path:
    """A results JSON; `weights`: the file its features came from (its sha256 recorded as extract does)."""
    provenance = {"sha256": sha256_file(weights)} if weights is not None else {}
    results = {
        "schema": "plstitch.results/v1",
        "task": task,
        "dataset": dataset,
        "features": "store",
        "model": {"spec": str(weights.parent) if weights else "run", "provenance": provenance},
        "protocol": {"k": 20, "temperature": 0.07},
        "metrics": {"accuracy": 71.25, "macro_f1_pooled": 60.5, "macro_f1_video": 58.0},
        "per_video": {},
        "predictions": {"video41": [0, 1, 1]},
        "plstitch_version": "0.1.0",
        "created": "2026-11-22T23:00:00+00:00",
    }
    path.write_text(json.dumps(results), encoding="utf-8")
    return path


def cls_after_norm(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Textbook frame feature: the CLS token of the final-normed token sequence."""
    with torch.no_grad():
        return model.forward_features(images)[:, 0]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, VisionTransformer, TemporalHead, Path]:
    root = tmp_path_factory.mktemp("export")
    run, teacher, head = make_run_dir(root)
    results = make_results(root / "knn.json", weights=run / "backbone" / "model.safetensors")
    out = export_model(run, root / "exported" / "tiny-plstitch", [results])
    return out, teacher, head, run


def test_export_folder_loads_with_plain_timm_and_matches_teacher(exported) -> None:
    out, teacher, _, _ = exported
    assert {p.name for p in out.iterdir()} == EXPECTED_FILES
    loaded = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    images = torch.randn(3, 3, 32, 32)
    expected = cls_after_norm(teacher, images)
    assert torch.equal(cls_after_norm(loaded, images), expected)
    with torch.no_grad():
        assert torch.equal(loaded(images), expected)  # num_classes=0: the model's output is the feature


def test_export_config_is_timm_schema(exported) -> None:
    out = exported[0]
    config = json.loads((out / "config.json").read_text())
    assert config["num_features"] == 32
    assert config["model_args"]["embed_dim"] == 32 and config["model_args"]["depth"] == 2
    cfg = config["pretrained_cfg"]
    assert cfg["input_size"] == [3, 32, 32]
    assert cfg["interpolation"] == "bicubic"
    assert cfg["crop_pct"] == pytest.approx(32 / DataConfig.for_size(32).resize_size)  # crop / resize side
    assert cfg["mean"] == pytest.approx([0.485, 0.456, 0.406]) and cfg["std"] == pytest.approx(
        [0.229, 0.224, 0.225]
    )
    assert timm.models.is_model(config["architecture"])


def test_export_records_config_version_commit_and_head(exported) -> None:
    out, _, head, _ = exported
    meta = json.loads((out / "plstitch.json").read_text())
    assert meta["training_config"] == TRAIN_CONFIG
    assert meta["data_summary"]["dataset"] == "synthetic" and meta["data_summary"]["fps"] == 1.0
    assert meta["data_summary"]["last_log"] == {"epoch": 1, "step": 2, "loss": 2.0}
    commit = meta["git_commit"]
    assert commit == "unknown" or (len(commit) == 40 and all(c in "0123456789abcdef" for c in commit))
    assert meta["plstitch_version"]
    assert meta["results"][0]["metrics"]["accuracy"] == 71.25 and "predictions" not in meta["results"][0]
    assert set(meta["files"]) == EXPECTED_FILES - {"plstitch.json"}
    loaded_head = load_temporal_head(out)
    frames = torch.randn(2, 5, 32)
    with torch.no_grad():
        assert torch.equal(loaded_head(frames), head(frames))


def test_export_from_checkpoint_takes_the_checkpoint_weights(tmp_path: Path) -> None:
    run, teacher, head = make_run_dir(tmp_path, perturb_checkpoint=True)
    out = export_model(run / "last.ckpt", tmp_path / "out")
    loaded = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    images = torch.randn(2, 3, 32, 32)
    assert torch.equal(cls_after_norm(loaded, images), cls_after_norm(teacher, images))
    frames = torch.randn(1, 4, 32)
    with torch.no_grad():
        assert torch.equal(load_temporal_head(out)(frames), head(frames))
    meta = json.loads((out / "plstitch.json").read_text())
    assert meta["source"]["kind"] == "checkpoint"
    assert "masked_embed" in meta["source"]["dropped_keys"]
    assert any("ibot_head." in k for k in meta["source"]["dropped_keys"])


def test_export_checkpoint_without_backbone_dir_infers_the_vit(tmp_path: Path) -> None:
    run, teacher, _ = make_run_dir(tmp_path)
    lone = tmp_path / "elsewhere" / "last.ckpt"
    lone.parent.mkdir()
    checkpoint = torch.load(run / "last.ckpt", weights_only=True)
    checkpoint["config"] = {**TRAIN_CONFIG, "model_args": {"num_heads": 2}}
    torch.save(checkpoint, lone)
    out = export_model(lone, tmp_path / "out")
    loaded = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    images = torch.randn(2, 3, 32, 32)
    assert torch.equal(cls_after_norm(loaded, images), cls_after_norm(teacher, images))
    assert not (out / "temporal_head.safetensors").exists()


def test_failed_export_leaves_nothing(tmp_path: Path) -> None:
    run, _, _ = make_run_dir(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "other/v0"}))
    with pytest.raises(ConfigError, match="bad.json"):
        export_model(run, tmp_path / "out" / "model", [bad])
    leftovers = list((tmp_path / "out").glob("*model*")) if (tmp_path / "out").exists() else []
    assert leftovers == []


def test_export_refuses_existing_folder_unless_overwrite(exported, tmp_path: Path) -> None:
    _, _, _, run = exported
    out = tmp_path / "existing"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    with pytest.raises(PublishError, match="already exists"):
        export_model(run, out)
    with pytest.raises(ConfigError, match="holds stale.txt, which plstitch did not write"):  # issue 59
        export_model(run, out, options=ExportOptions(overwrite=True))
    assert (out / "stale.txt").read_text() == "old"  # a file of the user's is never deleted
    (out / "stale.txt").unlink()
    for _ in range(2):  # into the empty folder, then over the export itself
        export_model(run, out, options=ExportOptions(overwrite=True))
        assert {p.name for p in out.iterdir()} == EXPECTED_FILES
    assert not list(tmp_path.glob(".existing*"))


def test_export_cli(exported, tmp_path: Path) -> None:
    _, teacher, _, run = exported
    weights = run / "backbone" / "model.safetensors"
    linear = make_results(tmp_path / "linear.json", task="linear", dataset="gtea", weights=weights)
    knn = make_results(tmp_path / "knn.json", task="knn", dataset="gtea", weights=weights)
    out = tmp_path / "cli-out"
    args = ["export", str(run), "--out", str(out), "--repo-id", "me/tiny", "--results", str(linear), str(knn)]
    result = CliRunner().invoke(app, args)  # as the shell expands `--results results/*.json`
    assert result.exit_code == 0, result.output
    assert [r["file"] for r in json.loads((out / "plstitch.json").read_text())["results"]] == [
        "linear.json",
        "knn.json",
    ]
    assert str(out) in result.stdout
    readme = (out / "README.md").read_text()
    assert "hf-hub:me/tiny" in readme and "linear_accuracy" in readme
    images = torch.randn(1, 3, 32, 32)
    loaded = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    assert torch.equal(cls_after_norm(loaded, images), cls_after_norm(teacher, images))


def test_export_missing_source_is_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", str(tmp_path / "nope"), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1
    assert "does not exist" in result.output and "Traceback" not in result.output
    stray = CliRunner().invoke(app, ["export", str(tmp_path / "nope"), "stray", "--out", str(tmp_path / "o")])
    assert stray.exit_code == 1 and "Unexpected arguments" in stray.output


def test_git_commit_outside_a_checkout_is_unknown(tmp_path: Path) -> None:
    assert git_commit(tmp_path) == "unknown"


def test_real_tiny_training_run_exports_loads_and_dry_run_pushes(video_dir, frame_cache, tmp_path) -> None:
    """Done-when of the issue: a tiny-cpu run is exported, loaded by plain timm, carded and pushable."""
    from plstitch_train.publishing.publish import push_to_hub
    from plstitch_train.trainer import train
    from tests.train.conftest import tiny_config

    result = train(tiny_config(video_dir, frame_cache, epochs=1), tmp_path / "run")
    results = make_results(tmp_path / "knn.json", weights=result.out_dir / "backbone" / "model.safetensors")
    from_run = export_model(result.out_dir, tmp_path / "from-run", [results])
    from_ckpt = export_model(result.out_dir / "last.ckpt", tmp_path / "from-ckpt")

    # independent reference: the teacher tensors of last.ckpt put into a ViT built by hand
    state = torch.load(result.out_dir / "last.ckpt", weights_only=True)["model"]
    prefix = "teacher.backbone.vit."
    teacher = tiny_vit()
    teacher.load_state_dict(
        {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}, strict=True
    )
    images = torch.randn(2, 3, 32, 32)
    expected = cls_after_norm(teacher, images)
    for folder in (from_run, from_ckpt):
        loaded = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
        assert torch.equal(cls_after_norm(loaded, images), expected)
        assert (folder / "temporal_head.safetensors").is_file()
    meta = json.loads((from_run / "plstitch.json").read_text())
    assert meta["training_config"]["clip_len"] == 4 and meta["data_summary"]["fps"] == 4.0
    assert push_to_hub(from_run, "me/tiny", dry_run=True).files


def test_card_keeps_a_non_commercial_base_models_licence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started from a non-commercial model exports a card under its licence, even with --license mit."""
    from plstitch_eval.hub.registry import MODELS

    nc = next(name for name, entry in MODELS.items() if entry.non_commercial)
    monkeypatch.setitem(TRAIN_CONFIG, "init", nc)
    run, _, _ = make_run_dir(tmp_path)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["export", str(run), "--out", str(out), "--license", "mit"])
    assert result.exit_code == 0, result.output
    card = ModelCard.load(out / "README.md")
    assert card.data.license == MODELS[nc].license.lower()
    assert f"inherited from the initial weights {nc}" in card.text
    plain = tmp_path / "plain"
    monkeypatch.setitem(TRAIN_CONFIG, "init", None)
    run2, _, _ = make_run_dir(tmp_path / "second")
    assert CliRunner().invoke(app, ["export", str(run2), "--out", str(plain)]).exit_code == 0
    assert ModelCard.load(plain / "README.md").data.license == "mit"


def test_the_publishing_package_hands_on_its_modules_names() -> None:
    """`plstitch_train.publishing` names its modules' objects (README's old `plstitch_train.export`,
    `.publish` and `.cards` are aliases of those modules: tests/test_moved_modules.py)."""
    assert all(module.__all__ for module in (export_module, publish, cards))
    assert (
        export_module.export_model is publishing.export_model
        and cards.card_licence is publishing.card_licence
    )
    assert all(hasattr(publishing, name) for name in publishing.__all__)
