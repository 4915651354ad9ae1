import pytest
import torch

from plstitch_eval.errors import ModelNotFoundError
from plstitch_eval.hub import DataConfig, ModelEntry, list_models, load_encoder, register, save_timm_dir
from plstitch_eval.hub.convert import vit_from_state_dict
from plstitch_eval.hub.registry import MODELS
from tests.eval.hub.conftest import make_tiny_vit

REQUIRED = {
    "pl-stitch-lemon",
    "pl-stitch-breakfast",
    "pl-stitch-gtea",
    "dino-vitb16",
    "mae-vitb16",
    "dinov2-vitb14",
    "ibot-vitb16",
    "lemonfm",
    "endovit",
}


def test_required_models_are_registered():
    assert {entry.name for entry in list_models()} >= REQUIRED
    assert MODELS["pl-stitch-lemon"].repo_id == "visurg/PL-Stitch"
    assert MODELS["pl-stitch-breakfast"].filename == "pl_breakfast.pth"
    assert MODELS["lemonfm"].repo_id == "visurg/LemonFM" and MODELS["lemonfm"].feature_dim == 1536


@pytest.mark.parametrize("entry", list_models(), ids=lambda e: e.name)
def test_every_entry_is_complete_and_loads_or_fails_helpfully(entry, hf_cache, monkeypatch):
    assert entry.feature_dim > 0 and entry.license and entry.citation and entry.architecture
    assert entry.license_source and entry.preprocessing_source  # every entry cites both
    if entry.repo_id and entry.architecture.startswith("vit"):  # the published ViTs run at 224...
        size = 336 if entry.name.startswith(("surgenet-dinov2", "surgenet-dinov3")) else 224  # ...or 336
        assert entry.data_config.input_size == (3, size, size)
        if entry.data_config.crop_mode == "center":  # DINO eval protocol (resize 256 for a 224 crop)
            assert entry.data_config.resize_size == round(size / 0.875)
            assert entry.data_config.interpolation == "bicubic"
        else:  # the whole frame (PL-Stitch, EndoViT: their authors' transform)
            assert entry.name.startswith(("pl-stitch", "endovit")) and entry.data_config.resize_size == 224
    if entry.path_env:
        monkeypatch.delenv(entry.path_env, raising=False)
    local = entry.resolve_local_path()
    if not entry.has_weights or (local is not None and local.exists()):  # built in or shipped: loads offline
        assert load_encoder(entry.name).feature_dim == entry.feature_dim
        return
    with pytest.raises(ModelNotFoundError) as info:
        load_encoder(entry.name)
    if entry.repo_id:
        assert entry.repo_id in str(info.value) and f"plstitch download {entry.name}" in str(info.value)


def test_layer_scale_vit_and_img_size_override(tmp_path):
    model = make_tiny_vit(patch_size=4, img_size=16, init_values=0.5)  # DINOv2-style layer scale
    loaded, _ = vit_from_state_dict(model.state_dict())
    x = torch.randn(1, 3, 16, 16)
    with torch.no_grad():
        assert torch.equal(loaded.forward_features(x), model.forward_features(x))
    save_timm_dir(model, tmp_path / "ls", DataConfig.for_size(16))
    name = "tiny-dinov2-like"
    register(
        ModelEntry(name, "vit", 64, "timm", local_path=str(tmp_path / "ls"), model_args={"img_size": 24})
    )
    try:
        encoder = load_encoder(name)
    finally:
        MODELS.pop(name)
    assert encoder.data_config.input_size == (3, 24, 24) and encoder.model.pos_embed.shape[1] == 1 + 36
    with torch.no_grad():
        assert encoder(torch.randn(2, 3, 24, 24)).shape == (2, 64)
