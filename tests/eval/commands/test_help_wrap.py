"""Issue 44: help paragraphs are wrapped once, to the terminal's width - not wrapped at 110 columns in the
docstring and then again by rich (ragged short lines at 80 columns, as `plstitch extract --help` had)."""

from __future__ import annotations

import click
import pytest
import typer
from typer.testing import CliRunner

from plstitch_eval.cli import app, unwrap_help

WIDTH = 80
TEXT_WIDTH = WIDTH - 2  # rich pads the help text by one column each side
runner = CliRunner()


def _command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix] if prefix else []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            paths += _command_paths(command, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


def _description_paragraphs(help_page: str) -> list[list[str]]:
    """The lines of each paragraph between the usage line and the first panel, as rendered."""
    lines = help_page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:]:
        if line.lstrip().startswith("╭"):
            break
        if line.strip():
            paragraphs[-1].append(line.rstrip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


def _early_breaks(paragraph: list[str]) -> list[str]:
    """Lines broken although the next word would have fitted on them (what a second wrapping leaves)."""
    return [
        line
        for line, after in zip(paragraph, paragraph[1:], strict=False)
        if len(line) + 1 + len(after.split()[0]) <= TEXT_WIDTH + 1  # + 1: the leading pad column
    ]


@pytest.mark.parametrize("path", _command_paths(typer.main.get_command(app)), ids=" ".join)
def test_every_help_paragraph_is_wrapped_once_at_80_columns(path):
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": str(WIDTH)}, terminal_width=WIDTH)
    assert result.exit_code == 0, result.output
    paragraphs = _description_paragraphs(result.stdout)
    assert paragraphs, result.stdout
    for paragraph in paragraphs:
        assert not _early_breaks(paragraph), "\n".join(paragraph)


def test_extract_help_reads_as_whole_sentences():
    result = runner.invoke(app, ["extract", "--help"], env={"COLUMNS": str(WIDTH)}, terminal_width=WIDTH)
    text = "\n".join(" ".join(p) for p in _description_paragraphs(result.stdout))
    assert "its own store <out>/<name> (the registry name" in " ".join(text.split())
    assert max(len(p) for p in _description_paragraphs(result.stdout)) <= 6  # not a dozen ragged lines


@pytest.mark.parametrize("group", [(), ("analyze",)], ids=["plstitch", "analyze"])
def test_the_command_listing_wraps_each_first_paragraph_once(group):
    result = runner.invoke(app, [*group, "--help"], env={"COLUMNS": str(WIDTH)}, terminal_width=WIDTH)
    lines = result.stdout.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("╭─ Commands"))
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("╰"))
    rows = lines[top + 1 : bottom]
    entries: list[list[str]] = []  # per command, its description lines
    start = None
    for row in rows:
        inner = row[1:].rstrip()[:-1]  # between the panel's borders
        if not inner.startswith("  ") and inner.strip():  # a command's name starts a new entry
            name = inner.split()[0]
            start = inner.index(name) + len(name)
            start += len(inner[start:]) - len(inner[start:].lstrip())
            entries.append([])
        if start is not None and entries:
            entries[-1].append(inner[start:].rstrip())
    assert len(entries) >= 7, result.stdout
    column = WIDTH - 2 - start - 1  # the description column, less its right padding
    for described in entries:
        for line, after in zip(described, described[1:], strict=False):
            assert len(line) + 1 + len(after.split()[0]) > column, "\n".join(described)


def test_unwrap_help_joins_wrapped_lines_and_keeps_deliberate_ones():
    text = """First line
    of the summary.

    A paragraph wrapped
    at some width.

    Items:
    - one item
      continued
    - two
    1. numbered

    \b
    kept
      as is"""
    assert unwrap_help(text) == (
        "First line of the summary.\n\n"
        "A paragraph wrapped at some width.\n\n"
        "Items:\n- one item\n  continued\n- two\n1. numbered\n\n"
        "\b\nkept\n  as is"
    )
    assert unwrap_help("One line.") == "One line."
