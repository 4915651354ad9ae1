"""Issue 59: the one checker of output paths (`check_output_path`) and the one rule of what `--overwrite` may
delete (`OwnedFiles`): a path under a regular file, `.`/`..` for a folder replaced whole, an empty name are
one line; a folder holding anything a command does not write is refused naming the first such entry, and
nothing is deleted."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.outputs import (
    FILE,
    FOLDER,
    OWNED_FOLDER,
    REPLACED_FOLDER,
    OwnedFiles,
    check_output_path,
    replace_folder,
)

TOY = OwnedFiles("a toy folder", ("result.json", "*.bin", ".locks"), nested=True)


def _one_line(info: pytest.ExceptionInfo) -> str:
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("kind", [FILE, FOLDER, REPLACED_FOLDER])
def test_a_path_under_a_regular_file_is_one_line_naming_that_file(tmp_path, kind):
    (tmp_path / "plainfile").write_text("x")
    with pytest.raises(ConfigError) as info:
        check_output_path(tmp_path / "plainfile" / "deeper" / "x.json", "--json", kind)
    message = _one_line(info)
    assert f"{tmp_path / 'plainfile'} is a file, not a folder" in message and message.startswith("--json ")


@pytest.mark.parametrize("name", [".", "..", "sub/.."])
@pytest.mark.parametrize("kind", [FILE, REPLACED_FOLDER])
def test_dot_names_no_file_or_replaced_folder(tmp_path, monkeypatch, name, kind):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match="names no (file|folder) of its own") as info:
        check_output_path(name, "--save", kind)
    assert "--save NAME" in _one_line(info) or "--save results.json" in str(info.value)


def test_a_folder_written_into_may_be_the_current_one_and_stdout_is_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert check_output_path(".", "--out", FOLDER).name == ""
    assert str(check_output_path("-", "--json", FILE)) == "-"
    with pytest.raises(ConfigError, match="--out is empty"):
        check_output_path("", "--out", FOLDER)


def test_file_and_folder_kinds_refuse_each_other(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "d").mkdir()
    with pytest.raises(ConfigError, match="is a folder; give a file name"):
        check_output_path(tmp_path / "d", "--json", FILE)
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_output_path(tmp_path / "a.json", "--out", FOLDER)
    assert check_output_path(tmp_path / "a.json", "--json", FILE) == tmp_path / "a.json"  # replaced


def test_the_first_foreign_entry_is_named_even_inside_a_folder(tmp_path):
    folder = tmp_path / "out"
    (folder / ".locks").mkdir(parents=True)
    (folder / "result.json").write_text("{}")
    (folder / "P01" / "cam").mkdir(parents=True)
    (folder / "P01" / "cam" / "a.bin").write_bytes(b"x")
    assert TOY.foreign(folder) is None
    (folder / "P01" / "cam" / "notes.txt").write_text("mine")
    assert TOY.foreign(folder) == folder / "P01" / "cam" / "notes.txt"
    with pytest.raises(ConfigError) as info:
        TOY.check(folder)
    assert "holds P01/cam/notes.txt, which plstitch did not write" in _one_line(info)


def test_an_empty_folder_a_link_and_a_hidden_file_are_not_the_commands(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "my_analysis").mkdir()  # mkdir by the user: not a folder of the command's files
    assert TOY.foreign(folder) == folder / "my_analysis"
    os.rmdir(folder / "my_analysis")
    (tmp_path / "elsewhere.bin").write_bytes(b"x")
    os.symlink(tmp_path / "elsewhere.bin", folder / "link.bin")
    assert TOY.foreign(folder) == folder / "link.bin"


def test_remove_deletes_only_after_the_check_and_keeps_what_it_is_told(tmp_path):
    folder = tmp_path / "out"
    (folder / ".locks").mkdir(parents=True)
    (folder / "result.json").write_text("{}")
    (folder / "x.bin").write_bytes(b"x")
    (folder / "thesis.tex").write_text("mine")
    with pytest.raises(ConfigError, match="thesis.tex"):
        TOY.remove(folder, keep=(".locks",))
    assert sorted(p.name for p in folder.iterdir()) == [".locks", "result.json", "thesis.tex", "x.bin"]
    (folder / "thesis.tex").unlink()
    TOY.remove(folder, keep=(".locks",))
    assert [p.name for p in folder.iterdir()] == [".locks"]


def test_a_folder_to_start_in_is_refused_beside_a_users_file_in_other_words(tmp_path, monkeypatch):
    """Issue 64: a command starting its own folder (no --overwrite involved) says so, not "--overwrite"."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "result.json").write_text("{}")
    TOY.check(".", overwrite=False)  # only the command's own files: it may continue there
    (tmp_path / "thesis.tex").write_text("mine")
    with pytest.raises(ConfigError) as info:
        TOY.check(".", "--out", overwrite=False)
    message = _one_line(info)
    assert message.startswith("--out . holds thesis.tex, which plstitch did not write;")
    assert "choose another --out (or move thesis.tex out of it)" in message and "--overwrite" not in message


def test_an_owned_folder_is_checked_as_a_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plainfile").write_text("x")
    assert check_output_path(".", "--out", OWNED_FOLDER).name == ""  # what it holds is the command's check
    with pytest.raises(ConfigError, match="--out plainfile is a file, not a folder"):
        check_output_path("plainfile", "--out", OWNED_FOLDER)
    with pytest.raises(ConfigError, match="--out is empty; give a folder name"):
        check_output_path("", "--out", OWNED_FOLDER)


def test_replace_folder_swaps_whole_and_puts_the_old_one_back_on_failure(tmp_path, monkeypatch):
    folder, new = tmp_path / "out", tmp_path / "new"
    for path, text in ((folder, "old"), (new, "new")):
        path.mkdir()
        (path / "a.txt").write_text(text)
    replace_folder(new, folder)
    assert (folder / "a.txt").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    again = tmp_path / "again"
    again.mkdir()
    real_replace = os.replace

    def failing(src, dst):
        if Path(src) == again:
            raise OSError("disk full")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="disk full"):
        replace_folder(again, folder)
    assert (folder / "a.txt").read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == [
        "again",
        "out",
    ]
