"""The encoder-spec grammar (`hub/spec.py`): every kind parsed, malformed specs refused in one line, and
`check_spec` telling a mistyped name from a path before anything loads."""

from __future__ import annotations

from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.hub import spec as spec_module
from plstitch_eval.hub.spec import (
    SPEC_KINDS,
    EncoderSpec,
    check_spec,
    hub_spec,
    parse_spec,
    random_init_source,
    random_init_spec,
)

FORMS = (
    "a registry name (`plstitch models`), hf-hub:ORG/NAME, random-init:SPEC, or a folder or checkpoint path"
)

# spec -> (kind, repo_id, filename, revision, kind of the spec inside a random-init one)
PARSED = {
    "dino-vitb16": ("registry", None, None, None, None),
    "raw-pixels": ("registry", None, None, None, None),
    "hf-hub:timm/vit_base_patch16_224.dino": ("hf-hub", "timm/vit_base_patch16_224.dino", None, None, None),
    "hf-hub:org/name@v1": ("hf-hub", "org/name", None, "v1", None),
    "hf-hub:org/name/weights.pth": ("hf-hub", "org/name", "weights.pth", None, None),
    "hf-hub:org/name@abc123/sub/dir/model.safetensors": (
        "hf-hub",
        "org/name",
        "sub/dir/model.safetensors",
        "abc123",
        None,
    ),
    "hf-hub:org/name/": ("hf-hub", "org/name", None, None, None),
    "random-init:plstitch-tiny-synthetic": ("random-init", None, None, None, "registry"),
    "random-init:hf-hub:org/name": ("random-init", None, None, None, "hf-hub"),
    "random-init:./runs/x": ("random-init", None, None, None, "path"),
    "./runs/x": ("path", None, None, None, None),
    "~/weights/model.pth": ("path", None, None, None, None),
    "/abs/folder": ("path", None, None, None, None),
    "model.safetensors": ("path", None, None, None, None),
    "no-such-model": (
        "path",
        None,
        None,
        None,
        None,
    ),  # a path as far as the grammar goes: check_spec refuses it
}

# malformed specs -> the one-line ConfigError each gets
REFUSED = {
    "hf-hub:": "Bad Hub spec 'hf-hub:'; use hf-hub:ORG/NAME or hf-hub:ORG/NAME/FILE.",
    "hf-hub:org": "Bad Hub spec 'hf-hub:org'; use hf-hub:ORG/NAME or hf-hub:ORG/NAME/FILE.",
    "hf-hub:/name": "Bad Hub spec 'hf-hub:/name'; use hf-hub:ORG/NAME or hf-hub:ORG/NAME/FILE.",
    "hf-hub:org/": "Bad Hub spec 'hf-hub:org/'; use hf-hub:ORG/NAME or hf-hub:ORG/NAME/FILE.",
    "random-init:": "random-init needs a model spec after 'random-init:', got ''.",
    "random-init:random-init:dino-vitb16": (
        "random-init needs a model spec after 'random-init:', got 'random-init:dino-vitb16'."
    ),
    "random-init:hf-hub:org": "Bad Hub spec 'hf-hub:org'; use hf-hub:ORG/NAME or hf-hub:ORG/NAME/FILE.",
}


@pytest.mark.parametrize("text", list(PARSED))
def test_every_kind_is_parsed(text: str) -> None:
    kind, repo_id, filename, revision, inner = PARSED[text]
    parsed = parse_spec(text)
    assert parsed.kind in SPEC_KINDS and str(parsed) == parsed.text == text
    assert (parsed.kind, parsed.repo_id, parsed.filename, parsed.revision) == (
        kind,
        repo_id,
        filename,
        revision,
    )
    assert (parsed.source.kind if parsed.source else None) == inner
    if kind == "registry":
        assert parsed.entry.name == text
    if kind == "path":
        assert parsed.path == Path(text).expanduser()


def test_the_table_covers_every_kind() -> None:
    assert {kind for kind, *_ in PARSED.values()} == set(SPEC_KINDS)


@pytest.mark.parametrize("text", list(REFUSED))
def test_malformed_specs_are_one_line_config_errors(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_spec(text)
    assert str(info.value) == REFUSED[text] and "\n" not in str(info.value)


def test_a_path_object_and_the_spec_builders_round_trip(tmp_path: Path) -> None:
    assert parse_spec(tmp_path) == EncoderSpec("path", str(tmp_path))
    assert parse_spec(hub_spec("org/name")).repo_id == "org/name"
    assert parse_spec(hub_spec("org/name", "w.pth")).filename == "w.pth"
    wrapped = random_init_spec("dino-vitb16")
    assert random_init_source(wrapped) == "dino-vitb16" and random_init_source("dino-vitb16") is None
    assert parse_spec(wrapped).source == parse_spec("dino-vitb16")


def test_only_a_registry_spec_has_an_entry() -> None:
    with pytest.raises(ConfigError, match="is a path spec, not a registry name"):
        _ = parse_spec("./x").entry


def test_old_homes_of_the_grammar_still_answer() -> None:
    from plstitch_eval.hub.hub_files import parse_hf_spec
    from plstitch_eval.hub.random_init import RANDOM_INIT_PREFIX
    from plstitch_eval.hub.random_init import random_init_source as old_source

    assert parse_hf_spec("hf-hub:org/name@v2/f.bin") == ("org/name", "f.bin", "v2")
    assert RANDOM_INIT_PREFIX == spec_module.RANDOM_INIT_PREFIX and old_source is random_init_source


# check_spec: spec -> what it returns, or the ConfigError it raises
CHECKED = {
    " dino-vitb16 ": "dino-vitb16",
    "hf-hub:org/name": "hf-hub:org/name",
    "random-init:plstitch-tiny-synthetic": "random-init:plstitch-tiny-synthetic",
    "./runs/x": "./runs/x",
    "~/x": "~/x",
    "runs/x": "runs/x",
    "weights.pth": "weights.pth",
    "WEIGHTS.SAFETENSORS": "WEIGHTS.SAFETENSORS",
}
CHECK_REFUSED = {
    "": f"Empty model spec; pass {FORMS}.",
    "weights.txt": f"Unknown model 'weights.txt'. Pass {FORMS}.",
    "raw-pixel": f"Unknown model 'raw-pixel'. Did you mean 'raw-pixels'? Pass {FORMS}.",
    "random-init:no-such-model": f"Unknown model 'no-such-model'. Pass {FORMS}.",
    "random-init:": "random-init needs a model spec after 'random-init:', got ''.",
    "hf-hub:org": "Bad Hub spec 'hf-hub:org'; use hf-hub:ORG/NAME or hf-hub:ORG/NAME/FILE.",
}


@pytest.mark.parametrize("text", list(CHECKED))
def test_check_spec_accepts_what_load_encoder_could_take(text: str) -> None:
    assert check_spec(text) == CHECKED[text]


@pytest.mark.parametrize("text", list(CHECK_REFUSED))
def test_check_spec_refuses_in_one_line(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_spec(text)
    assert str(info.value) == CHECK_REFUSED[text]


def test_an_existing_bare_name_is_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodel").mkdir()
    assert check_spec("mymodel") == "mymodel"


def test_an_option_and_its_collections_shape_the_messages() -> None:
    """What a list option such as the benchmark's --models says: where, and its own names as matches."""
    collections = ("paper-surgical", "paper-cooking")
    with pytest.raises(ConfigError) as info:
        check_spec("paper-surgicl", option="--models", collections=collections)
    assert str(info.value) == (
        "Unknown model 'paper-surgicl' in --models. Did you mean 'paper-surgical'? Pass a registry name "
        "(`plstitch models`), a collection (paper-surgical, paper-cooking), hf-hub:ORG/NAME, "
        "random-init:SPEC, or a folder or checkpoint path."
    )
    with pytest.raises(ConfigError) as info:
        check_spec(" ", option="--models")
    assert str(info.value) == "--models has an empty item (two commas in a row?); write A,B,... ."
