"""`TrainConfig`: six sections, the nested form it writes, the old flat form run folders saved, and the flat
names scripts, presets and the CLI use (the compatibility path)."""

from __future__ import annotations

import dataclasses
import json
import pickle
from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_train.config import (
    FIELD_SECTION,
    FLAT_FIELDS,
    SECTIONS,
    FramesConfig,
    LossConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    SamplingConfig,
    TrainConfig,
    flat_settings,
    setting_name,
)
from plstitch_train.presets import TrainConfig as PresetsTrainConfig
from plstitch_train.presets import get_preset
from plstitch_train.run.plan import config_differences

# `get_preset("tiny-cpu").to_dict()` as written by the flat TrainConfig, before the sections existed
OLD_FLAT_TINY = Path(__file__).with_name("tiny_cpu_flat_train_config.json")


def test_sections_and_their_field_names() -> None:
    assert list(SECTIONS) == ["frames", "sampling", "model", "loss", "optim", "run"]
    assert [cls for cls in SECTIONS.values()] == [
        FramesConfig,
        SamplingConfig,
        ModelConfig,
        LossConfig,
        OptimConfig,
        RunConfig,
    ]
    assert len(FLAT_FIELDS) == len(set(FLAT_FIELDS)) == 78  # unique across sections
    assert not set(FLAT_FIELDS) & set(SECTIONS)  # so `config.data` and `config.objective` stay settings
    assert PresetsTrainConfig is TrainConfig


def test_an_old_flat_saved_config_loads_and_equals_the_preset() -> None:
    old = json.loads(OLD_FLAT_TINY.read_text(encoding="utf-8"))
    assert "optim" not in old and old["base_lr"] == 0.016  # the flat form indeed
    preset = get_preset("tiny-cpu")
    # settings added since, at the value old runs computed with (the permutation head: one Linear)
    added = {
        "centering": "center",
        "permutation_head": "linear",
        "permutation_classes": 0,
        "local_crops": 0,
        "local_crops_scale": [0.05, 0.4],
        "local_crop_size": 0,
        "compile": False,
        "collapse_every": 50,
        "stop_on_collapse": False,
        "eval_every": 0,
        "eval_dataset": None,
        "eval_root": None,
        "eval_split": None,
        "eval_fps": 1.0,
    }
    as_old = preset.replace(**added)  # the preset at those values
    assert TrainConfig.from_dict(old) == as_old  # a saved config lacking them reads them as old runs used
    assert as_old.to_flat_dict() == {**old, **added}
    assert [key for key in preset.to_flat_dict() if key not in added] == list(old)  # same keys, same order
    assert config_differences(old, as_old.to_dict()) == {}  # the old run folder resumes
    assert config_differences(old, as_old.replace(centering="sinkhorn_knopp").to_dict()) == {
        "centering": ("center", "sinkhorn_knopp")
    }


def test_an_old_permutation_run_resumes_only_with_the_head_and_classes_it_trained() -> None:
    old = {**json.loads(OLD_FLAT_TINY.read_text(encoding="utf-8")), "objective": "permutation"}
    preset = get_preset("tiny-cpu").replace(objective="permutation")
    assert (preset.permutation_head, preset.permutation_classes) == ("temporal", 0)  # today's defaults
    assert config_differences(old, preset.replace(permutation_head="linear").to_dict()) == {}
    # today's defaults train another classifier: a rerun is refused, naming the setting
    assert config_differences(old, preset.to_dict()) == {"permutation_head": ("linear", "temporal")}
    sampled = preset.replace(permutation_head="linear", permutation_classes=12)
    assert config_differences(old, sampled.to_dict()) == {"permutation_classes": (0, 12)}


def test_an_old_pl_run_folder_resumes_with_todays_defaults() -> None:
    old = json.loads(OLD_FLAT_TINY.read_text(encoding="utf-8"))
    assert old["objective"] == "pl"
    assert config_differences(old, get_preset("tiny-cpu").to_dict()) == {}


def test_an_old_permutation_runs_saved_config_rebuilds_its_linear_head() -> None:
    old = {**json.loads(OLD_FLAT_TINY.read_text(encoding="utf-8")), "objective": "permutation"}
    assert TrainConfig.from_dict(old).permutation_head == "linear"


def test_to_dict_writes_the_nested_form_and_reads_it_back() -> None:
    config = get_preset("tiny-cpu").replace(data="videos")
    saved = json.loads(json.dumps(config.to_dict()))
    assert list(saved) == list(SECTIONS)
    assert saved["optim"]["base_lr"] == 0.016 and saved["frames"]["data"] == "videos"
    assert saved["sampling"]["context_seconds"] == [0.5, 1.5]  # plain JSON
    assert TrainConfig.from_dict(saved) == config
    assert flat_settings(saved) == config.to_flat_dict()


def test_from_dict_accepts_section_dot_name_keys_and_refuses_unknown_or_twice_given() -> None:
    assert TrainConfig.from_dict({"optim.epochs": 3, "lambda_mim": 0.0}).optim.epochs == 3
    with pytest.raises(ConfigError, match="Unknown training settings"):
        TrainConfig.from_dict({**TrainConfig().to_dict(), "lamda_vid": 1.0})
    with pytest.raises(ConfigError, match=r"Unknown optim settings \['lr'\]"):
        TrainConfig.from_dict({"optim": {"lr": 1.0}})
    with pytest.raises(ConfigError, match="epochs is given twice"):
        TrainConfig.from_dict({**TrainConfig().to_dict(), "epochs": 5})


def test_an_old_flat_dict_without_frame_store_trained_from_raw_frames() -> None:
    old = TrainConfig().to_flat_dict()
    del old["frame_store"]
    assert TrainConfig.from_dict(old).frame_store == "raw"
    nested = TrainConfig().to_dict()
    del nested["frames"]["frame_store"]
    assert TrainConfig.from_dict(nested).frame_store == "lmdb"  # the nested form never lacked it


def test_flat_names_read_and_write_the_setting_in_its_section() -> None:
    config = get_preset("tiny-cpu")
    for name, section in FIELD_SECTION.items():
        assert getattr(config, name) == getattr(getattr(config, section), name)
    config.epochs = 4
    assert config.optim.epochs == 4 and "epochs" not in vars(config)
    with pytest.raises(AttributeError, match="lr"):
        _ = config.lr


def test_replace_takes_flat_names_dotted_names_and_sections_checked() -> None:
    base = get_preset("tiny-cpu")
    changed = base.replace(epochs=6, fps=3.0, **{"loss.lambda_jigsaw": 0.0})
    assert (changed.optim.epochs, changed.frames.fps, changed.loss.lambda_jigsaw) == (6, 3.0, 0.0)
    assert base.optim.epochs == 1  # a copy
    assert base.replace(optim=OptimConfig(epochs=2)).optim == OptimConfig(epochs=2)
    assert base.replace(optim=OptimConfig(epochs=2), base_lr=0.5).optim == OptimConfig(epochs=2, base_lr=0.5)
    assert base.replace(init=None, max_steps=None) == base  # None: not given (CLI defaults)
    assert base.replace(max_steps=3).with_changes(max_steps=None).max_steps is None  # applied
    with pytest.raises(ConfigError, match="mask_ratio"):
        base.replace(mask_ratio=2.0)
    with pytest.raises(ConfigError, match="did you mean 'base_lr'"):
        base.replace(base_lrr=0.1)
    with pytest.raises(ConfigError, match="base_lr belongs to section 'optim'"):
        base.replace(**{"model.base_lr": 0.1})
    with pytest.raises(ConfigError, match="must be a OptimConfig"):
        base.replace(optim=RunConfig())


def test_constructor_takes_flat_names_as_the_flat_config_did() -> None:
    config = TrainConfig(data="videos", fps=1.0, frame_size=256, frame_store="raw")
    assert config.frames == FramesConfig(data="videos", frame_size=256, frame_store="raw")
    assert config.optim == OptimConfig() and config.validate() is config


def test_dataclasses_replace_keeps_working_for_scripts() -> None:
    base = get_preset("tiny-cpu")
    changed = dataclasses.replace(base, epochs=6, lambda_vid=0.0, dataset="synthetic")
    assert changed == base.replace(epochs=6, lambda_vid=0.0, dataset="synthetic")
    assert changed.frames.fps == base.frames.fps  # the rest of the section is kept


def test_checks_across_sections_run_on_every_path() -> None:
    message = r"permutation classification needs 1 <= clip_len <= 8 \(got 9"
    with pytest.raises(ConfigError, match=message):
        TrainConfig(objective="permutation", clip_len=9)
    with pytest.raises(ConfigError, match=message):
        TrainConfig(clip_len=9).replace(loss=LossConfig(objective="permutation"))
    assert TrainConfig(clip_len=16).replace(objective="permutation", clip_len=8).clip_len == 8
    # a sampled set (permutation_classes N) within the clip's permutations passes at clip_len <= 8 too
    sampled = TrainConfig(objective="permutation", clip_len=8, permutation_classes=1000)
    assert sampled.permutation_classes == 1000


def test_a_sampled_permutation_set_is_checked_against_the_clip_on_construction() -> None:
    assert TrainConfig(objective="permutation", clip_len=12, permutation_classes=500).clip_len == 12
    message = r"permutation_classes 30 exceeds the 24 permutations of clip_len 4"
    with pytest.raises(ConfigError, match=message):
        TrainConfig(objective="permutation", clip_len=4, permutation_classes=30)


def test_validate_rechecks_every_section_and_the_data_source() -> None:
    config = get_preset("tiny-cpu").replace(data="videos")
    assert config.validate() is config
    config.optim.epochs = 0  # a section changed in place is checked again before training
    with pytest.raises(ConfigError, match="epochs must be >= 1"):
        config.validate()
    with pytest.raises(ConfigError, match="exactly one data source"):
        get_preset("tiny-cpu").validate()


def test_setting_names_and_copies() -> None:
    assert setting_name("base_lr") == setting_name("optim.base_lr") == "base_lr"
    config = get_preset("tiny-cpu")
    assert pickle.loads(pickle.dumps(config)) == config  # spawned reproduction jobs receive it pickled
    copied = config.replace(epochs=3)
    copied.seed = 7  # as with the flat config, a copy's setting is its own
    assert copied.run is not config.run and config.seed == 0
