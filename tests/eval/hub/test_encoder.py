import numpy as np
import pytest
import torch
from PIL import Image

from plstitch_eval.errors import CheckpointError, ModelNotFoundError
from plstitch_eval.hub import DataConfig, ModelEntry, load_encoder, save_timm_dir
from tests.eval.hub.conftest import make_tiny_tv_convnext, make_tiny_vit, sha256
from tests.eval.hub.test_convert import reference_convnext_features, training_checkpoint


@pytest.fixture(scope="module")
def vit():
    return make_tiny_vit()


def _cls(model, x):
    with torch.no_grad():
        return model.forward_features(x)[:, 0]


def test_hub_training_checkpoint_by_registry_name(vit, hf_cache, temp_entry):
    snapshot, commit = hf_cache(
        "visurg/PL-Stitch", {"pl_tiny.pth": lambda p: torch.save(training_checkpoint(vit.state_dict()), p)}
    )
    temp_entry(
        ModelEntry(
            "pl-stitch-tiny",
            "vit_tiny",
            64,
            "vit",
            repo_id="visurg/PL-Stitch",
            filename="pl_tiny.pth",
            expected={"depth": 2, "embed_dim": 64},
        )
    )
    encoder = load_encoder("pl-stitch-tiny")
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(encoder(x), _cls(vit, x))
    prov = encoder.provenance
    assert prov["repo_id"] == "visurg/PL-Stitch" and prov["filename"] == "pl_tiny.pth"
    assert prov["commit"] == commit and prov["sha256"] == sha256(snapshot / "pl_tiny.pth")
    assert encoder.feature_dim == 64 and encoder.patch_size == 8
    assert encoder.data_config.input_size == (3, 32, 32) and encoder.data_config.resize_size == 37
    assert not encoder.training and not any(p.requires_grad for p in encoder.parameters())


def test_registry_name_resolves_and_checks_sizes(vit, hf_cache):
    hf_cache(
        "visurg/PL-Stitch", {"pl_lemon.pth": lambda p: torch.save(training_checkpoint(vit.state_dict()), p)}
    )
    with pytest.raises(CheckpointError, match="depth: found 2, expected 12"):  # a tiny file is not ViT-B/16
        load_encoder("pl-stitch-lemon")


def test_hf_hub_file_spec_plain_state_dict(vit, hf_cache):
    _, commit = hf_cache("org/raw", {"sub/weights.bin": lambda p: torch.save(vit.state_dict(), p)})
    encoder = load_encoder("hf-hub:org/raw/sub/weights.bin")
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(encoder(x), _cls(vit, x))
    assert encoder.provenance["commit"] == commit and encoder.provenance["filename"] == "sub/weights.bin"


def test_hf_hub_timm_repo(vit, hf_cache, tmp_path):
    folder = save_timm_dir(vit, tmp_path / "export", DataConfig.for_size(32, interpolation="bilinear"))

    def copy(name):
        return lambda p: p.write_bytes((folder / name).read_bytes())

    snapshot, commit = hf_cache(
        "org/tiny-vit", {"config.json": copy("config.json"), "model.safetensors": copy("model.safetensors")}
    )
    encoder = load_encoder("hf-hub:org/tiny-vit")
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(encoder(x), _cls(vit, x))
        assert encoder.forward_tokens(x).shape == (2, 1 + 16, 64)
    assert encoder.data_config.interpolation == "bilinear"
    assert encoder.provenance["commit"] == commit
    assert encoder.provenance["sha256"] == sha256(snapshot / "model.safetensors")


def test_lemonfm_style_convnext_from_hub(hf_cache, temp_entry):
    tv_model = make_tiny_tv_convnext()
    checkpoint = {"teacher": {f"backbone.{k}": v for k, v in tv_model.state_dict().items()}, "epoch": 1}
    hf_cache("visurg/LemonFM", {"tiny.pth": lambda p: torch.save(checkpoint, p)})
    temp_entry(
        ModelEntry(
            "lemonfm-tiny",
            "convnext",
            32,
            "convnext",
            repo_id="visurg/LemonFM",
            filename="tiny.pth",
            data_config=DataConfig.for_size(64),
        )
    )
    encoder = load_encoder("lemonfm-tiny")
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.allclose(encoder(x), reference_convnext_features(tv_model, x), atol=1e-5)
    assert encoder.feature_dim == 32 and encoder.patch_size is None
    assert encoder.data_config.input_size == (3, 64, 64)  # a CNN keeps its entry's preprocessing
    with pytest.raises(Exception, match="ViT"):
        encoder.forward_tokens(x)


def test_offline_missing_model_names_repo_file_revision_and_fix(hf_cache):
    with pytest.raises(ModelNotFoundError) as info:
        load_encoder("pl-stitch-gtea", revision="v1")
    message = str(info.value)
    for part in ("visurg/PL-Stitch", "pl_gtea.pth", "'v1'", "plstitch download pl-stitch-gtea", "local path"):
        assert part in message
    with pytest.raises(ModelNotFoundError, match="org/absent"):
        load_encoder("hf-hub:org/absent")


def test_explicit_cache_dir_and_revision(vit, hf_cache, monkeypatch, tmp_path):
    _, commit = hf_cache("org/raw", {"w.pth": lambda p: torch.save(vit.state_dict(), p)}, revision="v2")
    cache = hf_cache.cache_dir
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "elsewhere"))
    encoder = load_encoder("hf-hub:org/raw/w.pth", revision="v2", cache_dir=cache)
    assert encoder.provenance["commit"] == commit and encoder.provenance["revision"] == "v2"


def test_run_dir_and_local_registry_entry(vit, tmp_path, temp_entry):
    run = tmp_path / "run"
    save_timm_dir(vit, run / "backbone", DataConfig.for_size(32))
    (run / "last.ckpt").write_bytes(b"not read")
    encoder = load_encoder(str(run))
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(encoder(x), _cls(vit, x))
    temp_entry(ModelEntry("tiny-local", "vit_tiny", 64, "timm", local_path=str(run / "backbone")))
    with torch.no_grad():
        assert torch.equal(load_encoder("tiny-local")(x), _cls(vit, x))
    with pytest.raises(ModelNotFoundError, match="neither a registry model"):
        load_encoder(str(tmp_path / "nope.pth"))


def test_transform_and_batched_preprocess_agree(vit, tmp_path):
    save_timm_dir(vit, tmp_path / "m", DataConfig.for_size(32))
    encoder = load_encoder(str(tmp_path / "m"))
    frames = np.random.default_rng(0).integers(0, 256, size=(3, 45, 60, 3), dtype=np.uint8)
    singles = torch.stack([encoder.transform(f) for f in frames])
    assert singles.shape == (3, 3, 32, 32) and singles.dtype == torch.float32
    batched = encoder.preprocess_batch(torch.from_numpy(frames))
    assert torch.equal(batched, singles)  # on CPU the batch path is the per-image transform exactly
    channels_first = encoder.preprocess_batch(torch.from_numpy(frames).permute(0, 3, 1, 2))
    assert torch.equal(channels_first, batched)
    # textbook check of one pixel: normalise((value / 255 - mean) / std) after an identity-size resize
    square = np.full((37, 37, 3), 200, dtype=np.uint8)
    out = encoder.transform(Image.fromarray(square))
    expected = (200 / 255 - torch.tensor(encoder.data_config.mean)) / torch.tensor(encoder.data_config.std)
    assert torch.allclose(out[:, 16, 16], expected, atol=1e-5)
