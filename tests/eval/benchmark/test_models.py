"""`--models`: collections expanded, specs checked before anything loads (a typo gets a suggestion), and one
distinct folder name per spec under --out."""

from __future__ import annotations

import pytest

from plstitch_eval.benchmark import models
from plstitch_eval.benchmark.models import COLLECTIONS, check_model_spec, expand_models, model_dirs
from plstitch_eval.errors import ConfigError
from plstitch_eval.hub import safe_load


def test_models() -> None:
    surgical = expand_models("paper-surgical")
    assert "pl-stitch-lemon" in surgical and "dino-vitb16" in surgical
    assert expand_models("raw-pixels,./runs/x,raw-pixels,random-init:plstitch-tiny-synthetic") == [
        "raw-pixels",
        "./runs/x",
        "random-init:plstitch-tiny-synthetic",
    ]
    with pytest.raises(ConfigError, match="Unknown model 'plstitch-tiny-synthetc'.*Did you mean"):
        expand_models("plstitch-tiny-synthetc")


def test_checkpoint_names_are_the_loaders_suffixes() -> None:
    assert models.CHECKPOINT_SUFFIXES is safe_load.CHECKPOINT_SUFFIXES  # one home: hub/safe_load.py
    for suffix in safe_load.CHECKPOINT_SUFFIXES:
        assert check_model_spec(f" weights{suffix} ") == f"weights{suffix}"  # not opened before its cells run
    with pytest.raises(ConfigError, match="Unknown model 'weights.txt'"):
        check_model_spec("weights.txt")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("", "empty item"),
        ("random-init:no-such-model", "Unknown model 'no-such-model'"),
        ("paper-surgicl", "Did you mean 'paper-surgical'"),
    ],
)
def test_bad_model_specs(spec: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        check_model_spec(spec)


def test_every_collection_names_registry_models() -> None:
    for collection in COLLECTIONS.values():
        assert collection.available() and expand_models(collection.name) == collection.available()


def test_model_dirs_are_folder_safe_and_distinct() -> None:
    long = "hf-hub:" + "x" * 100
    dirs = model_dirs(["raw-pixels", "a/b", "a:b", "./runs/x", long])
    assert dirs["raw-pixels"] == "raw-pixels" and dirs["./runs/x"] == "runs_x"
    assert dirs["a/b"] != dirs["a:b"] and dirs["a/b"].startswith("a_b-")  # a clash: a digest each
    assert len(dirs[long]) == 79 and dirs[long].startswith("hf-hub_xxx")
    assert len(set(dirs.values())) == len(dirs)
    assert model_dirs(["a/b"]) == {"a/b": "a_b"}
