"""`--datasets` items and TOML/YAML datasets files: parsed in order with roots relative to the file, and
every mistake one clear ConfigError naming the file, the dataset and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from plstitch_eval.benchmark.datasets_file import parse_datasets, read_datasets_file
from plstitch_eval.errors import ConfigError
from tests.eval.benchmark.conftest import SMALL_DATASET


def test_dataset_list_and_files(tmp_path: Path, datasets_file: Path) -> None:
    specs = parse_datasets(f"synthetic,folder={datasets_file.parent / 'clips-data'}")
    assert [(s.name, s.adapter) for s in specs] == [("synthetic", "synthetic"), ("folder", "folder")]
    assert specs[1].root == datasets_file.parent / "clips-data"

    from_toml = read_datasets_file(datasets_file)
    assert [(s.name, s.adapter, s.root) for s in from_toml] == [
        ("synthetic", "synthetic", None),
        ("clips", "folder", datasets_file.parent / "clips-data"),
    ]
    assert from_toml[0].options == SMALL_DATASET
    yaml_file = datasets_file.parent / "datasets.yaml"
    yaml_file.write_text(
        "datasets:\n  synthetic:\n    options: {n_videos: 6, min_seconds: 8.0, max_seconds: 12.0}\n"
        "  clips: {adapter: folder, root: clips-data}\n",
        encoding="utf-8",
    )
    assert read_datasets_file(yaml_file) == from_toml


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("=/data", "'=/data' is malformed"),
        ("folder=", "'folder=' is malformed"),
        ("synthetic,,gtea=/x", "empty item"),
        ("cholec8=/tmp", "Did you mean 'cholec80'"),
        ("cholec80", "needs its folder"),
        ("folder=/no/such/folder", "/no/such/folder does not exist"),
        ("synthetic,synthetic", "given twice"),
        ("missing.toml", "missing.toml does not exist"),
    ],
)
def test_bad_dataset_items_are_one_clear_error(text: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(").replace(".", r"\.")):
        parse_datasets(text)


def test_bad_datasets_files(tmp_path: Path) -> None:
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("[synthetic]\nn_videos = \n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.toml: invalid TOML.*line 2"):
        read_datasets_file(bad_toml)
    bad_option = tmp_path / "opt.toml"
    bad_option.write_text("[synthetic]\nvideos_count = 3\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"opt\.toml: Dataset 'synthetic' does not take option\(s\) videos_co"
    ):
        read_datasets_file(bad_option)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("synthetic: [1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: invalid YAML at line 2"):
        read_datasets_file(bad_yaml)


def test_a_bad_key_is_one_line_naming_the_file_and_the_key(tmp_path: Path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text("[synthetic]\nn_vidoes = 3\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_datasets_file(path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert "'synthetic'" in message and "n_vidoes" in message and "n_videos" in message  # and what it accepts


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "lists no dataset"),
        ("synthetic = 3\n", "dataset 'synthetic' must be a table of settings"),
        ("[synthetic]\noptions = 3\n", "dataset 'synthetic': options must be a table, got int"),
        ("[folder]\nroot = 3\n", "dataset 'folder': root must be a string, got 3"),
        ("[synthetic]\nadapter = 3\n", "dataset 'synthetic': adapter must be a string, got 3"),
        ('[".hidden"]\nadapter = "synthetic"\n', "Dataset name '.hidden' must start with a letter or digit"),
        ('[mine]\nadapter = "nope"\n', "Unknown dataset 'mine' (adapter 'nope')"),
    ],
)
def test_bad_datasets_file_entries(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_datasets_file(path)
    assert str(info.value).startswith(f"{path}: ") and needle in str(info.value)
    assert "\n" not in str(info.value)


def test_datasets_file_forms(tmp_path: Path) -> None:
    """A `[datasets]` table may wrap the entries; `.yml` counts as YAML; names must differ across items."""
    wrapped = tmp_path / "wrapped.toml"
    wrapped.write_text("[datasets.synthetic]\nn_videos = 6\n", encoding="utf-8")
    (spec,) = read_datasets_file(wrapped)
    assert (spec.name, spec.adapter, spec.options) == ("synthetic", "synthetic", {"n_videos": 6})
    short = tmp_path / "short.yml"
    short.write_text("synthetic:\nsmall: {adapter: synthetic, n_videos: 6}\n", encoding="utf-8")
    assert [s.name for s in parse_datasets(str(short))] == ["synthetic", "small"]
    with pytest.raises(ConfigError, match="'synthetic' is given twice"):
        parse_datasets(f"{wrapped},synthetic")
