import json
import os
import stat

import timm
import torch

from plstitch_eval.hub import DataConfig, convnext_from_state_dict, load_timm_dir, save_timm_dir
from tests.eval.hub.conftest import make_tiny_tv_convnext, make_tiny_vit


def test_vit_folder_loads_with_plain_timm(tmp_path):
    model = make_tiny_vit(embed_dim=32, num_heads=2, depth=3)
    out = save_timm_dir(model, tmp_path / "vit", DataConfig.for_size(32))
    config = json.loads((out / "config.json").read_text())
    assert config["architecture"] == "vit_base_patch16_224"
    assert config["num_classes"] == 0 and config["num_features"] == 32 and config["global_pool"] == "token"
    assert config["model_args"]["num_heads"] == 2 and config["model_args"]["depth"] == 3
    cfg = config["pretrained_cfg"]
    for key in ("input_size", "interpolation", "crop_pct", "crop_mode", "mean", "std"):
        assert key in cfg
    assert cfg["input_size"] == [3, 32, 32] and cfg["interpolation"] == "bicubic"
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]  # no temp files left

    reloaded = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    x = torch.randn(2, 3, 32, 32)
    assert torch.equal(reloaded.forward_features(x), model.forward_features(x))

    ours, data_config = load_timm_dir(out)
    assert torch.equal(ours.forward_features(x), model.forward_features(x))
    assert data_config.resize_size == 37 and data_config.input_size == (3, 32, 32)  # round(32 / 0.875)


def test_convnext_folder_loads_with_plain_timm(tmp_path):
    model, _ = convnext_from_state_dict(make_tiny_tv_convnext().state_dict())
    out = save_timm_dir(model, tmp_path / "cnx", DataConfig.for_size(64), extra_files={})
    reloaded = timm.create_model(f"local-dir:{out}", pretrained=True).eval()
    x = torch.randn(1, 3, 64, 64)
    assert torch.equal(
        reloaded.forward_head(reloaded.forward_features(x), pre_logits=True),
        model.forward_head(model.forward_features(x), pre_logits=True),
    )


def test_extra_files_are_copied(tmp_path):
    card = tmp_path / "card.md"
    card.write_text("# tiny")
    out = save_timm_dir(
        make_tiny_vit(), tmp_path / "vit", DataConfig.for_size(32), extra_files={"README.md": card}
    )
    assert (out / "README.md").read_text() == "# tiny"


def test_saved_files_follow_the_umask(tmp_path):
    card = tmp_path / "card.md"
    card.write_text("# tiny")
    card.chmod(0o600)  # a private source file: the copy still follows the umask
    old = os.umask(0o022)
    try:
        out = save_timm_dir(
            make_tiny_vit(), tmp_path / "vit", DataConfig.for_size(32), extra_files={"README.md": card}
        )
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes == {"config.json": 0o644, "model.safetensors": 0o644, "README.md": 0o644}
