"""Where a command writes: output paths checked before any work starts, and what `--overwrite` may delete.

Why: a command that ends in a traceback once its work is done, or an `--overwrite` that deletes a user's own
files, costs more than any feature. Every output flag goes through `check_output_path` (the Typer options of
`commands/options.py` and the library functions that write), and every `--overwrite` that deletes goes
through an `OwnedFiles`: the names that command writes. A folder holding anything else is refused, naming the
first foreign entry; nothing is deleted then. A command starting its own folder (`OWNED_FOLDER`: a run, a
store, a quickstart, a reproduction) refuses the same way a folder holding anything it does not write, unless
the folder holds its record (a run's checkpoint or config, a store's manifest) - `.` included, so it never
starts beside a user's files.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.io import temp_dir_beside

FILE, FOLDER, REPLACED_FOLDER, EITHER = "file", "folder", "replaced folder", "file or folder"
OWNED_FOLDER = "owned folder"  # a folder the command fills as its own: it refuses one holding a user's files
KINDS = (FILE, FOLDER, OWNED_FOLDER, REPLACED_FOLDER, EITHER)  # what an output path names


def check_output_path(path: str | os.PathLike, flag: str = "--out", kind: str = FOLDER) -> Path:
    """Refuse, in one line, an output path that cannot be written; returns it (`~` expanded).

    Refused: an empty name; `.`/`..` where the target is a file or a folder replaced as a whole
    (`REPLACED_FOLDER`: written beside it, then renamed onto it); a path under a regular file; a folder
    where a file goes and the reverse (`EITHER`: a file or a folder, as the command decides). `-` (stdout)
    passes for a file. `OWNED_FOLDER` is checked here as `FOLDER`; what it holds, the command checks
    (`OwnedFiles.check` with `overwrite=False`).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    text = os.fspath(path)
    if kind == FILE and text == "-":
        return Path(text)
    what = {FILE: "file", EITHER: "file or folder"}.get(kind, "folder")
    if not text.strip():
        raise ConfigError(f"{flag} is empty; give a {what} name.")
    target = Path(text).expanduser()
    if kind in (FILE, REPLACED_FOLDER) and target.name in ("", ".", ".."):
        example = "results.json" if kind == FILE else "NAME"
        raise ConfigError(
            f"{flag} {text} names no {what} of its own, and the {what} is written beside its path and then "
            f"renamed onto it; give a new name (e.g. {flag} {example})."
        )
    blocker = file_ancestor(target)
    if blocker is not None:
        raise ConfigError(
            f"{flag} {text}: {blocker} is a file, not a folder; choose another {flag} "
            f"(or move {blocker} away)."
        )
    if kind == FILE and target.is_dir():
        raise ConfigError(f"{flag} {text} is a folder; give a file name (e.g. {target / 'results.json'}).")
    if kind in (FOLDER, OWNED_FOLDER, REPLACED_FOLDER) and target.exists() and not target.is_dir():
        raise ConfigError(f"{flag} {text} is a file, not a folder; choose a new or empty {what}.")
    return target


def file_ancestor(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` when it is not a folder (so nothing can be made under it)."""
    for parent in path.parents:
        if parent.exists() or parent.is_symlink():
            return None if parent.is_dir() else parent
    return None


@dataclass(frozen=True)
class OwnedFiles:
    """The entries of an output folder that one command writes: all its `--overwrite` may delete.

    `patterns`: fnmatch patterns of entry names (files or folders, each owned whole; a symbolic link never
    is); `nested`: a non-hidden, non-empty sub-folder whose entries are all owned is owned too (a feature
    store's videos named with folders); `what`: the folder's kind, for messages.
    """

    what: str
    patterns: tuple[str, ...]
    nested: bool = False

    def owns(self, path: Path) -> bool:
        """Whether `path`, an entry of the folder, is one the command writes."""
        return self.first_foreign(path) is None

    def first_foreign(self, path: Path) -> Path | None:
        """`path` itself, or the first entry inside it, that the command does not write; None when all is."""
        if path.is_symlink():  # a link points at someone's file
            return path
        if any(fnmatch.fnmatchcase(path.name, pattern) for pattern in self.patterns):
            return None
        if not self.nested or path.name.startswith(".") or not path.is_dir():
            return path
        try:
            entries = sorted(path.iterdir())
        except FileNotFoundError:  # removed meanwhile (another run starting the folder again)
            return None
        if not entries:  # an empty folder of the user's (mkdir) is not ours
            return path
        return next((found for e in entries if (found := self.first_foreign(e)) is not None), None)

    def foreign(self, folder: Path, ignore: Iterable[str] = ()) -> Path | None:
        """The first entry of `folder` (sorted; nested ones named in full) that is not the command's, or
        None; `ignore`: names not looked at."""
        if not folder.is_dir():
            return None
        skipped = set(ignore)
        for entry in sorted(folder.iterdir()):
            if entry.name not in skipped and (found := self.first_foreign(entry)) is not None:
                return found
        return None

    def check(
        self,
        folder: str | os.PathLike,
        flag: str = "--out",
        ignore: Iterable[str] = (),
        *,
        overwrite: bool = True,
    ) -> None:
        """Refuse, in one line naming the first foreign entry, a folder holding anything the command did not
        write: one `--overwrite` would delete from (`overwrite`), or one the command would start writing into
        beside a user's files (`overwrite=False`)."""
        folder = Path(folder)
        found = self.foreign(folder, ignore)
        if found is not None:
            raise ConfigError(foreign_message(folder, found, flag, self.what if overwrite else None))

    def remove(self, folder: str | os.PathLike, keep: Iterable[str] = ()) -> None:
        """Delete the command's entries of `folder` (not those named in `keep`), after `check`."""
        folder = Path(folder)
        self.check(folder, ignore=keep)
        kept = set(keep)
        for entry in sorted(folder.iterdir()):
            if entry.name in kept:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink(missing_ok=True)


def shown_entry(folder: Path, entry: Path) -> str:
    """`entry` relative to `folder`, a folder's name ending in `/`, for messages."""
    relative = entry.relative_to(folder).as_posix()
    return relative + ("/" if entry.is_dir() and not entry.is_symlink() else "")


def foreign_message(folder: Path, entry: Path, flag: str = "--out", overwriting: str | None = None) -> str:
    """The one line refusing `folder` because it holds `entry`, which plstitch did not write.

    `overwriting`: what the folder is ("an export folder"), where an `--overwrite` would delete its files;
    None where a command would start writing into the folder beside `entry`.
    """
    shown = shown_entry(folder, entry)
    if overwriting is not None:
        return (
            f"{flag} {folder} holds {shown}, which plstitch did not write; --overwrite deletes only "
            f"{overwriting}'s own files, so move {shown} out of it or choose another {flag}."
        )
    return (
        f"{flag} {folder} holds {shown}, which plstitch did not write; plstitch writes only into a new or "
        f"empty folder or one of its own, so choose another {flag} (or move {shown} out of it)."
    )


def replace_folder(tmp: Path, folder: Path) -> None:
    """Rename the finished folder `tmp` onto `folder`; an existing `folder` is moved aside first (put back if
    the rename fails) and removed after, so a reader sees the old folder or the new one, never a mix.

    `folder`: a resolved path (a link to a folder is resolved first, so the link then names the new folder).
    """
    if not folder.is_dir():
        os.replace(tmp, folder)
        return
    old = temp_dir_beside(folder)
    os.replace(folder, old)  # onto the fresh empty folder: rename(2) replaces an empty directory
    try:
        os.replace(tmp, folder)
    except BaseException:
        os.replace(old, folder)
        raise
    shutil.rmtree(old, ignore_errors=True)
