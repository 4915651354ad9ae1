"""The CLI is the top floor: only it imports the command modules, and the libraries never import it.

`plstitch_train` imports nothing CLI-ish (`plstitch_eval.cli`, `plstitch_eval.commands`, typer, click); in
`plstitch_eval` only `cli.py`, `__main__.py` and `commands/` import `plstitch_train` or the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLI_MODULES = ("plstitch_eval.cli", "plstitch_eval.commands")
CLI_FLOOR = ("plstitch_eval.cli", "plstitch_eval.__main__", "plstitch_eval.commands")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    return _imports_in(path.read_text(encoding="utf-8"), _module_name(path), path.name == "__init__.py")


def _imports_in(source: str, module: str, is_package: bool = False, top_level: bool = False) -> set[str]:
    """Every module an `import` or `from ... import` anywhere in `source` names (relative ones resolved);
    with `top_level`, only the statements that run when the module is imported (not in functions, classes
    or `if TYPE_CHECKING:` blocks).

    `from pkg import name` yields both `pkg` and `pkg.name`, since `name` may be a module.
    """
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    tree = ast.parse(source)
    for node in tree.body if top_level else ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def _sources(package: str) -> list[Path]:
    return sorted((REPO / package).rglob("*.py"))


@pytest.mark.parametrize("path", _sources("plstitch_train"), ids=lambda p: str(p.relative_to(REPO)))
def test_training_library_imports_nothing_of_the_cli(path: Path) -> None:
    bad = {name for name in _imports(path) if _within(name, (*CLI_MODULES, "typer", "click"))}
    assert not bad, f"{path.relative_to(REPO)} imports {sorted(bad)}"


@pytest.mark.parametrize("path", _sources("plstitch_eval"), ids=lambda p: str(p.relative_to(REPO)))
def test_only_the_cli_floor_imports_the_cli_or_the_trainer(path: Path) -> None:
    if _within(_module_name(path), CLI_FLOOR):
        return
    bad = {name for name in _imports(path) if _within(name, (*CLI_MODULES, "plstitch_train"))}
    assert not bad, f"{path.relative_to(REPO)} imports {sorted(bad)}"


def test_the_checker_sees_nested_and_relative_imports() -> None:
    source = "import typer\n\ndef f():\n    from plstitch_train import trainer\n    from . import cli\n"
    found = _imports_in(source, "plstitch_eval.extract")
    assert {"typer", "plstitch_train.trainer", "plstitch_eval.cli"} <= found
    assert "plstitch_eval.commands.train" in _imports_in("from ..commands import train", "plstitch_eval.x.y")
