"""`random-init:SPEC`: the architecture of a timm-format model with fresh, seeded weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from plstitch_eval.errors import ConfigError, ModelNotFoundError
from plstitch_eval.hub import DataConfig, load_encoder, save_timm_dir
from plstitch_eval.hub.random_init import is_timm_format_spec, random_init_spec, state_digest
from plstitch_eval.hub.run_folder import BACKBONE_DIR
from plstitch_eval.hub.timm_format import CONFIG_NAME, WEIGHTS_NAME, random_init_timm_dir
from plstitch_eval.quickstart import SHIPPED_DIR
from tests.eval.hub.conftest import make_tiny_vit

DATA = DataConfig.for_size(32, interpolation="bilinear")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny ViT saved in timm format (stands in for trained weights)."""
    return save_timm_dir(make_tiny_vit(), tmp_path_factory.mktemp("vit"), DATA)


def _same_shapes(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(sa[k].shape == sb[k].shape for k in sa)


def _equal(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_random_init_of_a_timm_folder(trained):
    source = load_encoder(str(trained))
    fresh = load_encoder(random_init_spec(trained))
    assert type(fresh.model) is type(source.model) and _same_shapes(fresh.model, source.model)
    assert fresh.feature_dim == source.feature_dim == 64 and fresh.patch_size == source.patch_size
    assert fresh.data_config == source.data_config == DATA
    differ = [
        k for k, v in source.model.state_dict().items() if not torch.equal(v, fresh.model.state_dict()[k])
    ]
    assert "patch_embed.proj.weight" in differ and "blocks.0.attn.qkv.weight" in differ
    x = torch.randn(2, 3, 32, 32)
    with torch.inference_mode():
        assert fresh(x).shape == (2, 64) and not torch.allclose(fresh(x), source(x))
    prov = fresh.provenance
    assert prov["spec"] == f"random-init:{trained}" and prov["source"] == str(trained)
    assert prov["random_init"] is True and prov["seed"] == 0
    assert prov["sha256"] == state_digest(fresh.model) != source.provenance["sha256"]
    assert prov["path"] == str((trained / CONFIG_NAME).resolve())


def test_random_init_is_deterministic_per_seed_and_keeps_the_global_rng(trained):
    state = torch.random.get_rng_state()
    a, config_a = random_init_timm_dir(trained, seed=0)
    b, _ = random_init_timm_dir(trained, seed=0)
    c, _ = random_init_timm_dir(trained, seed=1)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert _equal(a, b) and not _equal(a, c) and config_a == DATA
    assert _equal(load_encoder(random_init_spec(trained)).model, a)  # the spec form is seed 0
    assert state_digest(a) == state_digest(b) != state_digest(c)


def test_only_the_config_is_read(trained, tmp_path):
    folder = tmp_path / "config-only"
    folder.mkdir()
    (folder / CONFIG_NAME).write_bytes((trained / CONFIG_NAME).read_bytes())
    assert not (folder / WEIGHTS_NAME).exists()
    fresh = load_encoder(random_init_spec(folder))
    assert _equal(fresh.model, random_init_timm_dir(trained, seed=0)[0])


def test_run_folder_and_hf_hub_sources(trained, tmp_path, hf_cache):
    run = tmp_path / "run"
    save_timm_dir(make_tiny_vit(), run / BACKBONE_DIR, DATA)
    assert is_timm_format_spec(run)
    assert load_encoder(random_init_spec(run)).feature_dim == 64
    _, commit = hf_cache(
        "org/tiny-vit", {CONFIG_NAME: lambda p: p.write_bytes((trained / CONFIG_NAME).read_bytes())}
    )
    fresh = load_encoder("random-init:hf-hub:org/tiny-vit")  # no weights in the cache: not needed
    assert fresh.provenance["commit"] == commit and fresh.provenance["repo_id"] == "org/tiny-vit"
    assert _equal(fresh.model, random_init_timm_dir(trained, seed=0)[0])


@pytest.mark.skipif(not (SHIPPED_DIR / WEIGHTS_NAME).is_file(), reason="shipped model not exported yet")
def test_random_init_of_the_shipped_registry_model():
    shipped = load_encoder("plstitch-tiny-synthetic")
    fresh = load_encoder("random-init:plstitch-tiny-synthetic")
    assert fresh.feature_dim == shipped.feature_dim == 64 and _same_shapes(fresh.model, shipped.model)
    assert fresh.data_config == shipped.data_config
    assert not _equal(fresh.model, shipped.model)
    assert fresh.provenance["source"] == "plstitch-tiny-synthetic" and fresh.provenance["seed"] == 0


def test_sources_that_are_not_timm_format(tmp_path):
    ckpt = tmp_path / "model.pth"
    torch.save({"w": torch.ones(1)}, ckpt)
    assert not is_timm_format_spec("raw-pixels") and not is_timm_format_spec("pl-stitch-lemon")
    assert not is_timm_format_spec(ckpt) and not is_timm_format_spec(tmp_path)
    assert not is_timm_format_spec("hf-hub:org/name/file.pth") and is_timm_format_spec("hf-hub:org/name")
    assert is_timm_format_spec("plstitch-tiny-synthetic") and is_timm_format_spec("dino-vitb16")
    with pytest.raises(ConfigError, match="converter 'pixels'"):
        load_encoder("random-init:raw-pixels")
    with pytest.raises(ConfigError, match="is not one"):
        load_encoder(random_init_spec(ckpt))
    with pytest.raises(ConfigError, match="raw checkpoint file"):
        load_encoder("random-init:hf-hub:org/name/file.pth")
    with pytest.raises(ModelNotFoundError, match="neither a registry model"):
        load_encoder(random_init_spec(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="needs a model spec"):
        load_encoder("random-init:")
