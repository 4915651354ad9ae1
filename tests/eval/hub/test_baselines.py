"""Baselines as their authors load and preprocess them: transforms, sources, LemonFM file/width, which."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms.v2 import functional as tvf

from plstitch_eval.errors import CheckpointError, ConfigError
from plstitch_eval.hub import DataConfig, ModelEntry, load_encoder, save_timm_dir
from plstitch_eval.hub.download import download_model, entry_cached
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.preprocess import EvalTransform, frame_plan, resize_and_crop
from tests.eval.hub.conftest import make_tiny_tv_convnext, make_tiny_vit
from tests.eval.hub.test_convert import training_checkpoint


def _frame(height: int = 90, width: int = 160) -> np.ndarray:
    """A 16:9 uint8 frame whose left and right edges differ from its centre (a crop would lose them)."""
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    frame[:, : width // 8] = 255
    frame[:, -width // 8 :] = 0
    return frame


# ------------------------------------------------------------------------------------ registry and sources


def test_every_entry_cites_where_its_preprocessing_and_licence_come_from():
    for entry in MODELS.values():
        assert entry.license_source, entry.name
        assert entry.preprocessing_source, entry.name


def test_pl_stitch_endovit_and_lemonfm_feed_the_whole_frame_at_224():
    for name in ("pl-stitch-lemon", "pl-stitch-breakfast", "pl-stitch-gtea", "lemonfm", "endovit"):
        config = MODELS[name].data_config
        assert config.crop_mode == "squash" and config.input_size == (3, 224, 224), name
        assert config.resize_size == 224 and config.crop_pct == 1.0, name
    assert MODELS["pl-stitch-lemon"].data_config.mean == (0.485, 0.456, 0.406)
    endovit = MODELS["endovit"]
    assert endovit.data_config.mean == (0.3464, 0.2280, 0.2228)
    assert endovit.data_config.std == (0.2520, 0.2128, 0.2093)
    assert endovit.license == "Apache-2.0" and "egeozsoy/EndoViT" in endovit.license_source
    for name in ("dino-vitb16", "mae-vitb16", "dinov2-vitb14", "ibot-vitb16"):  # DINO evaluation transform
        config = MODELS[name].data_config
        assert (
            config.crop_mode == "center" and config.resize_size == 256 and config.interpolation == "bicubic"
        )


def test_pl_stitch_citation_has_the_paper_title():
    from plstitch_eval.resources import model_cards_dir

    title = json.loads((model_cards_dir() / "paper_results.json").read_text())["paper"]["title"]
    assert title == "A Stitch in Time: Learning Procedural Workflow via Self-Supervised Plackett-Luce Ranking"
    for name in ("pl-stitch-lemon", "pl-stitch-gtea", "plstitch-tiny-synthetic"):
        assert title in MODELS[name].citation


# --------------------------------------------------------------------------------------- the two transforms


def test_whole_frame_transform_keeps_the_sides_of_a_wide_frame():
    frame = _frame()
    squash = DataConfig.whole_frame(64, interpolation="bilinear")
    out = EvalTransform(squash)(frame)
    # independent: torchvision's resize of the whole frame to 64x64, then x/255, mean, std
    expected = tvf.resize(torch.from_numpy(frame).permute(2, 0, 1), [64, 64], antialias=True)
    expected = tvf.normalize(expected.float() / 255, list(squash.mean), list(squash.std))
    assert out.shape == (3, 64, 64)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=0)
    crop = EvalTransform(squash.with_transform("center-crop"))(frame)
    assert crop.shape == (3, 64, 64) and not torch.allclose(crop, out, atol=0.1)
    white = (255 / 255 - squash.mean[0]) / squash.std[0]
    assert out[0, :, 0].mean() == pytest.approx(white, abs=0.05)  # the left edge survives the squash
    assert crop[0, :, 0].mean() < white - 0.5  # ...and is cropped away by the centre crop


def test_whole_frame_matches_timm_squash_transform_on_pil_images():
    import timm.data

    frame = _frame(120, 214)
    config = DataConfig.whole_frame(32, interpolation="bilinear")
    cfg = config.to_pretrained_cfg()
    assert cfg["crop_mode"] == "squash" and cfg["crop_pct"] == 1.0
    timm_transform = timm.data.create_transform(
        input_size=tuple(cfg["input_size"]),
        interpolation=cfg["interpolation"],
        crop_pct=cfg["crop_pct"],
        crop_mode=cfg["crop_mode"],
        mean=cfg["mean"],
        std=cfg["std"],
    )
    theirs = timm_transform(Image.fromarray(frame))
    ours = EvalTransform(config)(frame)
    assert theirs.shape == ours.shape == (3, 32, 32)
    # PIL and torchvision antialiased bilinear differ by rounding only: a few grey levels at most
    assert (theirs - ours).abs().mul(0.229).max() < 4 / 255


def test_transform_names_round_trip_and_bad_names_fail():
    dino = DataConfig.for_size(224)
    squash = dino.with_transform("whole-frame")
    assert squash == DataConfig.whole_frame(224)
    assert squash.with_transform("center-crop") == dino
    assert DataConfig.from_pretrained_cfg(squash.to_pretrained_cfg()) == squash
    with pytest.raises(ConfigError, match="--transform 'crop'"):
        dino.with_transform("crop")
    with pytest.raises(ConfigError, match="crop_mode 'border'"):
        DataConfig.from_pretrained_cfg({**dino.to_pretrained_cfg(), "crop_mode": "border"})
    plan = frame_plan(squash, resize_on_decode=True)
    decoded = torch.zeros(3, 224, 398, dtype=torch.uint8)  # what a shorter-side-224 decoder gives
    assert resize_and_crop(decoded, plan).shape == (3, 224, 224)


def test_timm_folder_keeps_the_whole_frame_transform(tmp_path):
    folder = save_timm_dir(
        make_tiny_vit(), tmp_path / "m", DataConfig.whole_frame(32, interpolation="bilinear")
    )
    assert json.loads((folder / "config.json").read_text())["pretrained_cfg"]["crop_mode"] == "squash"
    assert load_encoder(folder).data_config.crop_mode == "squash"
    encoder = load_encoder(folder, transform="center-crop")
    assert encoder.data_config.crop_mode == "center" and encoder.provenance["transform"] == "center-crop"


# ------------------------------------------------------------------------------------------------- LemonFM


def test_lemonfm_file_is_lowercase_and_the_readme_spelling_is_tried(hf_cache):
    entry = MODELS["lemonfm"]
    assert entry.filenames == ("lemonfm.pth", "LemonFM.pth")
    assert not entry_cached(entry)
    hf_cache("visurg/LemonFM", {"LemonFM.pth": lambda p: torch.save({"w": torch.ones(1)}, p)})
    assert entry_cached(entry)
    assert [f.filename for f in download_model("lemonfm")] == ["LemonFM.pth"]


def test_lemonfm_missing_names_both_spellings(hf_cache):
    with pytest.raises(Exception, match=r"spellings tried: 'lemonfm.pth', 'LemonFM.pth'"):
        load_encoder("lemonfm")


def test_lemonfm_width_is_pinned(hf_cache, temp_entry):
    assert MODELS["lemonfm"].expected == {"depths": [3, 3, 27, 3], "dims": [192, 384, 768, 1536]}
    tv_model = make_tiny_tv_convnext()  # widths 8, 16, 24, 32
    checkpoint = {"teacher": {f"backbone.{k}": v for k, v in tv_model.state_dict().items()}}
    hf_cache("visurg/LemonFM", {"tiny.pth": lambda p: torch.save(checkpoint, p)})
    common = dict(repo_id="visurg/LemonFM", filename="tiny.pth", data_config=DataConfig.for_size(64))
    temp_entry(ModelEntry("wide", "convnext", 32, "convnext", expected={"dims": [8, 16, 24, 64]}, **common))
    with pytest.raises(CheckpointError, match=r"dims: found \[8, 16, 24, 32\], expected \[8, 16, 24, 64\]"):
        load_encoder("wide")


# -------------------------------------------------------------------------------------------------- --which


def test_which_student_gives_the_student(tmp_path):
    path = tmp_path / "ckpt.pth"
    torch.save(training_checkpoint(make_tiny_vit().state_dict()), path)
    teacher, student = load_encoder(path), load_encoder(path, which="student")
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert not torch.allclose(teacher(x), student(x))  # the helper gives the student another norm bias
    assert student.provenance["which"] == "student"


def test_which_student_without_a_student_is_one_clear_line(tmp_path):
    vit = make_tiny_vit()
    only_teacher = tmp_path / "teacher.pth"
    torch.save({"teacher": {f"backbone.{k}": v for k, v in vit.state_dict().items()}}, only_teacher)
    with pytest.raises(CheckpointError, match="holds a teacher but no student"):
        load_encoder(only_teacher, which="student")
    folder = save_timm_dir(vit, tmp_path / "timm", DataConfig.for_size(32))
    with pytest.raises(ConfigError, match="holding one network"):
        load_encoder(folder, which="student")
    with pytest.raises(ConfigError, match="which must be one of teacher, student"):
        load_encoder(folder, which="ema")
