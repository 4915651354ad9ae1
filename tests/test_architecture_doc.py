"""docs/architecture.md matches the code: every path it names exists, and its floor table agrees with the
imports (a module's import-time imports never reach a higher floor; every module sits on a floor)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_import_graph import _imports_in

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
PACKAGES = ("plstitch_eval", "plstitch_train")
PATH_TOKEN = re.compile(r"`([\w./*-]+(?:\.(?:py|md|toml|sh|png|json)|/))`")


def _repo_paths() -> list[str]:
    skip = {".git", ".venv", ".venv-ci", "__pycache__", "node_modules"}
    found = []
    for path in REPO.rglob("*"):
        parts = path.relative_to(REPO).parts
        if any(p in skip or p.endswith(".egg-info") for p in parts):
            continue
        found.append("/".join(parts) + ("/" if path.is_dir() else ""))
    return found


def _exists(token: str, paths: list[str]) -> bool:
    """Whether `token` names a file or folder of the repo, from the root or from any folder (the doc names
    modules relative to their package, e.g. `protocols/knn.py`)."""
    if "*" in token:
        pattern = re.compile("(^|/)" + re.escape(token).replace(r"\*", "[^/]*") + "$")
        return any(pattern.search(p) for p in paths)
    return any(p == token or p.endswith("/" + token) for p in paths)


def _names_source(token: str) -> bool:
    """A token the doc uses for a file or folder of this repo (a module, or a path from a top folder), not for
    one a run writes (`results/table.md`, `probe.json`, `backbone/`) or a dataset holds."""
    top = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}
    return "<" not in token and (token.endswith(".py") or token.split("/")[0] in top)


def test_every_path_the_architecture_doc_names_exists() -> None:
    paths = _repo_paths()
    tokens = sorted(set(PATH_TOKEN.findall(DOC.read_text(encoding="utf-8"))))
    missing = [t for t in tokens if _names_source(t) and not _exists(t, paths)]
    assert tokens and missing == []


def _floor_rows() -> dict[int, list[str]]:
    """Floor -> the paths its row names outside parentheses (inside them: parts of those paths)."""
    rows: dict[int, list[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\|\s*(\d+)\s*\|(.*?)\|[^|]*\|\s*$", line)
        if not match:
            continue
        text, depth, top = match.group(2), 0, []
        for char in text:
            depth += char == "("
            depth -= char == ")"
            top.append(char if depth == 0 else "")
        rows[int(match.group(1))] = re.findall(r"`([\w./*-]+)`", "".join(top))
    return rows


def _prefix(token: str) -> str:
    """A floor-table path as a module prefix of plstitch_eval (or a package of its own)."""
    token = token.removesuffix("*.py").removesuffix(".py").rstrip("/")
    if token.startswith(PACKAGES):
        return token.replace("/", ".")
    return "plstitch_eval." + token.replace("/", ".")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _import_time_imports(path: Path, module: str) -> set[str]:
    """Modules imported when `module` is imported (top-level statements, not TYPE_CHECKING blocks)."""
    return _imports_in(path.read_text(encoding="utf-8"), module, path.name == "__init__.py", top_level=True)


def test_the_floor_table_agrees_with_the_imports() -> None:
    prefixes = sorted(
        ((_prefix(token), floor) for floor, tokens in _floor_rows().items() for token in tokens),
        key=lambda item: -len(item[0]),
    )
    assert prefixes, "docs/architecture.md has no floor table"

    def floor_of(module: str) -> int | None:
        for prefix, floor in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                return floor
        return None

    modules = _modules()
    unplaced = sorted(m for m in modules if floor_of(m) is None and m not in PACKAGES)
    assert unplaced == [], "modules on no floor of docs/architecture.md"
    upward = []
    for module, path in modules.items():
        own = floor_of(module)
        if own is None:
            continue
        for target in _import_time_imports(path, module):
            if target not in modules or target in PACKAGES or target.startswith(module + "."):
                continue
            other = floor_of(target)
            if other is not None and other > own:
                upward.append(f"{module} (floor {own}) imports {target} (floor {other})")
    assert upward == []
