"""Locks of a feature store's concurrent writers (`plstitch_eval.store.features`): the manifest's
read-modify-write happens under the store's lock (`store_lock`), and an extraction claims each video it
encodes (`claim_video`). Both are `flock` locks on files in the store's `.locks/`, so a killed process
releases them with its open files; no stale lock is left behind.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from plstitch_eval.utils.console import logger

try:
    import fcntl
except ImportError:  # Windows: no flock; concurrent writers of one store are then not coordinated
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_DIR", "STORE_LOCK", "VideoClaim", "claim_video", "store_lock"]

LOCK_DIR = ".locks"
STORE_LOCK = "store.lock"


def _lock_path(root: Path, name: str) -> Path:
    path = root / LOCK_DIR / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


class _HeldLock:
    """This process's hold of one store lock: threads take turns, nested holds of one thread stack."""

    def __init__(self) -> None:
        self.turn = threading.RLock()
        self.fd: int | None = None
        self.depth = 0


_held_locks: dict[str, _HeldLock] = {}
_held_locks_guard = threading.Lock()


@contextlib.contextmanager
def store_lock(root: str | os.PathLike) -> Iterator[None]:
    """Hold the store's lock (`.locks/store.lock`, created with the folder) for a read-modify-write of its
    manifest. Reentrant within a process; another process waits (a note on stderr says for what)."""
    path = _lock_path(Path(root), STORE_LOCK)
    with _held_locks_guard:
        held = _held_locks.setdefault(str(path.resolve()), _HeldLock())
    with held.turn:
        if held.depth == 0:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            try:
                if not _flock(fd, blocking=False):
                    logger.info("%s: another process is updating this feature store; waiting for it", root)
                    _flock(fd, blocking=True)
            except BaseException:
                os.close(fd)
                raise
            held.fd = fd
        held.depth += 1
        try:
            yield
        finally:
            held.depth -= 1
            if held.depth == 0 and held.fd is not None:
                os.close(held.fd)  # closing the file drops the flock
                held.fd = None


_unlocked_noted = False


def _flock(fd: int, blocking: bool) -> bool:
    """Take an exclusive flock on `fd`; False when `blocking` is off and another process holds it. On a
    filesystem without locks (some network or FUSE mounts) it goes on unlocked, noted once on stderr."""
    global _unlocked_noted
    if fcntl is None:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError as exc:
        if not _unlocked_noted:
            _unlocked_noted = True
            logger.warning(
                "this filesystem refuses file locks (%s): runs writing one feature store at the same time "
                "are not coordinated; run one at a time",
                exc.strerror or exc,
            )
    return True


class VideoClaim:
    """This process's exclusive claim of one video of a store (an flock on `.locks/<video>.lock`).

    Why: two extraction runs into one store then never encode the same video; the claim dies with the
    process that holds it, so a killed run leaves nothing to clean up.
    """

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    def release(self) -> None:
        """Give the video back (idempotent)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def claim_video(root: str | os.PathLike, video: str) -> VideoClaim | None:
    """Claim `video` of the store at `root` without waiting; None while another process holds it."""
    fd = os.open(_lock_path(Path(root), f"{video}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
    if not _flock(fd, blocking=False):
        os.close(fd)
        return None
    return VideoClaim(fd)
