"""Command functions stay thin: every top-level function of a command module (plstitch_eval/commands/, and a
plstitch_train commands package should one appear) is at most 80 lines, `def` to its last line, signature
included. Policy (input checks, chosen settings, summaries, exit codes) lives in the library, tested there."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND_DIRS = (REPO / "plstitch_eval" / "commands", REPO / "plstitch_train" / "commands")
MAX_LINES = 80


def command_modules() -> list[Path]:
    """The modules of the command packages that exist."""
    return sorted(path for folder in COMMAND_DIRS if folder.is_dir() for path in folder.glob("*.py"))


def function_lengths(path: Path) -> dict[str, int]:
    """Each top-level function of `path` and its length in lines, from its `def` (decorators not counted)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {
        node.name: node.end_lineno - node.lineno + 1
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
    }


def test_function_lengths_counts_def_to_last_line(tmp_path: Path) -> None:
    module = tmp_path / "commands.py"
    module.write_text("@decorator\ndef f(\n    a: int,\n) -> None:\n    pass\n\n\ndef g():\n    return 1\n")
    assert function_lengths(module) == {"f": 4, "g": 2}


def test_every_command_function_is_at_most_80_lines() -> None:
    modules = command_modules()
    assert modules, "no command module found"
    offenders = [
        f"{path.relative_to(REPO)}: {name} ({lines} lines)"
        for path in modules
        for name, lines in function_lengths(path).items()
        if lines > MAX_LINES
    ]
    assert offenders == [], f"command functions over {MAX_LINES} lines (move the policy into the library)"
