"""The converter tag is the dispatch (`hub/converters.py`): one loader per tag, registry entries go through
their tag's loader, and a bare checkpoint's keys name a tag that goes through the same table."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub import ModelEntry, load_encoder
from plstitch_eval.hub import converters as converters_module
from plstitch_eval.hub.architectures.pixels import RawPixels
from plstitch_eval.hub.converters import LOADERS, Converted, get_loader, sniff_converter
from plstitch_eval.hub.model_entry import CLIP_CONVERTERS, CONVERTERS
from plstitch_eval.hub.registry import list_models, register
from plstitch_eval.preprocess import DataConfig
from tests.eval.hub import dinov3_reference
from tests.eval.hub.conftest import make_tiny_tv_convnext, make_tiny_vit
from tests.eval.hub.test_clip_models import timesformer_state, videomae_state
from tests.eval.hub.test_vjepa2 import hub_state as vjepa2_hub_state


def test_every_tag_has_one_loader_in_the_registrys_order() -> None:
    assert list(LOADERS) == list(CONVERTERS)


@pytest.mark.parametrize("entry", list_models(), ids=lambda e: e.name)
def test_every_registry_entry_has_a_loader(entry: ModelEntry) -> None:
    assert get_loader(entry.converter) is LOADERS[entry.converter]


def test_an_unknown_converter_is_one_line_naming_the_tags() -> None:
    with pytest.raises(ConfigError) as info:
        get_loader("resnet")
    assert str(info.value) == (
        "Unknown converter 'resnet'; choose one of timm, vit, convnext, dinov3, pixels, videomae, "
        "timesformer, vjepa2."
    )
    with pytest.raises(ConfigError, match="unknown converter 'resnet'; choose one of timm, vit"):
        register(ModelEntry("resnet-50", "resnet50", 2048, "resnet"))


def _tv_convnext_training_checkpoint() -> dict:
    return {"teacher": {f"backbone.{k}": v for k, v in make_tiny_tv_convnext().state_dict().items()}}


# a bare checkpoint of each layout -> the tag its keys call for
SNIFFED = {
    "vit": lambda: make_tiny_vit().state_dict(),
    "convnext": _tv_convnext_training_checkpoint,
    "dinov3": lambda: dinov3_reference.meta_state(),
    "videomae": lambda: videomae_state(),
    "timesformer": lambda: timesformer_state(),
    "vjepa2": lambda: vjepa2_hub_state(),
}


@pytest.mark.parametrize("tag", list(SNIFFED))
def test_a_bare_checkpoints_keys_name_its_tag(tag: str) -> None:
    assert sniff_converter(SNIFFED[tag]()) == tag


def test_the_sniffed_tags_are_the_checkpoint_tags() -> None:
    """Only "timm" (folders) and "pixels" (no weights) cannot be read off a checkpoint's keys."""
    assert set(SNIFFED) == set(CONVERTERS) - {"timm", "pixels"}
    assert set(CLIP_CONVERTERS) <= set(SNIFFED)


def _spy(monkeypatch: pytest.MonkeyPatch, tag: str) -> list[ModelEntry | None]:
    """Wrap LOADERS[tag] so each call records the entry it was given."""
    seen: list[ModelEntry | None] = []
    real = LOADERS[tag]

    def spy(checkpoint, entry, which, source) -> Converted:
        seen.append(entry)
        return real(checkpoint, entry, which, source)

    monkeypatch.setitem(LOADERS, tag, spy)
    return seen


def test_a_registry_entry_goes_through_its_tags_loader(tmp_path: Path, monkeypatch, temp_entry) -> None:
    path = tmp_path / "convnext.pth"
    torch.save(_tv_convnext_training_checkpoint(), path)
    entry = temp_entry(
        ModelEntry(
            "tiny-convnext", "convnext", 32, "convnext", local_path=str(path), data_config=DataConfig()
        )
    )
    seen = _spy(monkeypatch, "convnext")
    assert load_encoder("tiny-convnext").feature_dim == 32
    assert seen == [entry]


def test_a_bare_checkpoint_goes_through_the_same_table(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "vit.pth"
    torch.save(make_tiny_vit().state_dict(), path)
    seen = _spy(monkeypatch, "vit")
    encoder = load_encoder(path)
    assert encoder.is_vit and seen == [None]


def test_a_timm_entry_given_a_checkpoint_file_reads_its_keys(tmp_path: Path, monkeypatch, temp_entry) -> None:
    path = tmp_path / "vit.pth"
    torch.save(make_tiny_vit().state_dict(), path)
    temp_entry(ModelEntry("timm-file", "vit_tiny", 64, "timm", local_path=str(path)))
    seen = _spy(monkeypatch, "vit")
    assert load_encoder("timm-file").is_vit and [e.name for e in seen if e] == ["timm-file"]


def test_pixels_are_built_without_a_checkpoint() -> None:
    converted = get_loader("pixels")(None, None, "teacher", "raw-pixels")
    assert isinstance(converted.model, RawPixels) and converted.dropped == [] and converted.clip is None


def test_a_bare_clip_checkpoint_takes_its_layouts_baseline_window() -> None:
    assert set(converters_module.CLIP_DEFAULTS) == set(CLIP_CONVERTERS)
    converted = get_loader("timesformer")(timesformer_state(), None, "teacher", "endo_fm.pth")
    assert converted.clip is not None and converted.clip.num_frames == converted.model.num_frames
