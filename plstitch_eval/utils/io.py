"""Atomic file writes: write to a temporary name in the same folder, then rename over the target."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to `target`; rename it onto `target` only if the block succeeds.

    The finished file gets the umask's permissions (0666 & ~umask) whatever wrote it: mkstemp creates 0600
    files and some writers (safetensors' `save_file`) replace the temp file with a new 0600 one.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # after the writer: it may have recreated the file
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


def temp_dir_beside(target: str | os.PathLike) -> Path:
    """A new hidden temporary folder next to `target` (same filesystem: renames are atomic), umask perms."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    return tmp


def _umask() -> int:
    """The process umask (mkstemp creates 0600 files; finished files should follow the umask).

    Read from /proc where possible: `os.umask` can only read it by setting it, which races with other
    threads creating files meanwhile.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(target: str | os.PathLike, text: str) -> None:
    """Write `text` to `target` atomically."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(target: str | os.PathLike, obj: Any) -> None:
    """Write `obj` as indented JSON to `target` atomically."""
    write_text_atomic(target, json.dumps(obj, indent=2, sort_keys=False, default=json_default) + "\n")


def write_json_output(target: str | os.PathLike, obj: Any) -> None:
    """Write `obj` as indented JSON to the file `target` (atomically), or to stdout when `target` is "-".

    Why: every `--json` option of the CLI means the same thing: a path, `-` for stdout.
    """
    if os.fspath(target) == "-":
        sys.stdout.write(json.dumps(obj, indent=2, default=json_default) + "\n")
        sys.stdout.flush()
    else:
        write_json_atomic(target, obj)


def json_default(obj: Any) -> Any:
    """Serialise numpy scalars/arrays and paths that json does not know."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serialisable")
