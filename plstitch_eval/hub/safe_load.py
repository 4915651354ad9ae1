"""Reading checkpoint files safely: safetensors, or `torch.load(weights_only=True)` with a small allowlist."""

from __future__ import annotations

import argparse
import hashlib
import pickle
import re
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file as load_safetensors

from plstitch_eval.errors import CheckpointError, UnsafeCheckpointError
from plstitch_eval.utils.console import logger

CHECKPOINT_SUFFIXES = (".safetensors", ".pth", ".pt", ".bin", ".ckpt")
MODEL_FILE_FIX = (
    "pass a .pth/.pt/.safetensors checkpoint, a timm folder or a registered name (`plstitch models`)"
)

_ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
_REFUSED_GLOBAL_RE = re.compile(r"GLOBAL (\S+) was not an allowed global|whose module (\S+) is blocked")
# Top-level modules of the globals plain checkpoints name (torch's allowlist and ours): not worth naming
# when a refusal says which globals a pickle needs.
_PLAIN_MODULES = frozenset({"torch", "collections", "_codecs", "builtins", "copyreg", "argparse", "numpy"})
_MAX_REASON = 160
_ZIP_MAGIC = b"PK\x03\x04"  # how torch.save's archives begin


def _harmless_globals() -> list[Any]:
    """Plain-data classes DINO/iBOT-style checkpoints pickle next to the weights (args, numpy scalars)."""
    allowed: list[Any] = [argparse.Namespace]
    try:
        core = getattr(np, "_core", None) or np.core
        allowed += [np.dtype, core.multiarray.scalar, core.multiarray._reconstruct, np.ndarray]
        # checkpoints written with numpy 1.x name these numpy.core.multiarray.*
        allowed += [
            (core.multiarray.scalar, "numpy.core.multiarray.scalar"),
            (core.multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
        ]
        allowed += [type(np.dtype(name)) for name in ("float64", "float32", "int64", "int32", "bool")]
    except Exception:  # numpy layout differs between versions; the allowlist is best effort
        pass
    return allowed


def load_checkpoint(path: str | Path, *, trust_pickle: bool = False, fix: str = MODEL_FILE_FIX) -> Any:
    """Load a `.safetensors` file or a pickle checkpoint without executing code from it.

    Pickles go through `torch.load(weights_only=True)`; one that needs code execution raises
    `UnsafeCheckpointError` unless `trust_pickle=True` (only for files from a source you trust).
    A file that is no checkpoint at all (text, random bytes, empty, truncated) raises `CheckpointError`
    naming the file, what torch said and `fix` (what the caller should pass instead).
    """
    path = Path(path)
    _check_readable(path, fix)
    if path.suffix == ".safetensors":
        return load_safetensors_file(path, fix=fix)
    if trust_pickle:
        logger.warning("Loading %s with trust_pickle=True: it may run arbitrary code.", path)
        try:
            return torch.load(path, map_location="cpu", weights_only=False)
        except Exception as exc:  # the pickle's own code may raise anything (missing module, ...)
            raise CheckpointError(
                f"Cannot load {path} even with --trust-pickle (torch.load failed: {_reason(exc)}); it may be "
                f"truncated or corrupt, or need the code that wrote it installed; {fix}."
            ) from exc
    try:
        with torch.serialization.safe_globals(_harmless_globals()), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Detected pickle protocol")  # refused below anyway
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # on bytes that are no checkpoint torch raises KeyError, IndexError, EOFError...
        needs_code = _needs_code_execution(path, exc)
        if needs_code is None:
            raise _unreadable(path, exc, fix) from exc
        raise UnsafeCheckpointError(
            f"Refused to load {path}: it is a pickle that needs code execution ({needs_code}). "
            "Convert it to safetensors, or pass --trust-pickle (trust_pickle=True) "
            "only if you trust its source."
        ) from exc


def load_safetensors_file(path: str | Path, *, fix: str = MODEL_FILE_FIX) -> dict[str, torch.Tensor]:
    """The tensors of a `.safetensors` file on CPU; `CheckpointError` naming the file if it is unreadable."""
    path = Path(path)
    _check_readable(path, fix)
    try:
        return load_safetensors(str(path), device="cpu")
    except Exception as exc:  # SafetensorError on a bad header, OSError, ...
        raise _bad_safetensors(path, exc, fix) from exc


def check_safetensors_file(path: str | Path, *, fix: str = MODEL_FILE_FIX) -> None:
    """Read a `.safetensors` file's header only (cheap): `CheckpointError` when it is empty, truncated or no
    safetensors file, before a library that would raise its own traceback (timm) reads it."""
    path = Path(path)
    _check_readable(path, fix)
    try:
        with safe_open(str(path), framework="pt", device="cpu"):
            pass
    except Exception as exc:  # SafetensorError on a bad or cut-short header
        raise _bad_safetensors(path, exc, fix) from exc


def _bad_safetensors(path: Path, exc: Exception, fix: str) -> CheckpointError:
    return CheckpointError(
        f"{path} is not a readable safetensors file ({_reason(exc)}); it may be truncated or corrupt: "
        f"download or export it again, or {fix}."
    )


def _check_readable(path: Path, fix: str) -> None:
    """`CheckpointError` for a missing, unreadable or empty file (an interrupted download or copy)."""
    if not path.is_file():
        raise CheckpointError(f"Checkpoint file {path} does not exist; {fix}.")
    try:
        with path.open("rb") as handle:
            empty = not handle.read(1)
    except OSError as exc:
        raise CheckpointError(f"Cannot read checkpoint {path}: {exc.strerror or exc}.") from exc
    if empty:
        raise CheckpointError(
            f"{path} is empty (0 bytes), not a checkpoint (an interrupted download or copy?); {fix}."
        )


def _unreadable(path: Path, exc: Exception, fix: str) -> CheckpointError:
    """The one-line error for a file torch could not load: names the file, torch's reason and the fix."""
    with path.open("rb") as handle:
        zip_start = handle.read(4) == _ZIP_MAGIC
    if zip_start and _pickle_globals(path) is None:  # torch.save's zip archive, cut short or damaged
        return CheckpointError(
            f"{path} is a truncated or damaged PyTorch checkpoint (torch.load failed: {_reason(exc)}); "
            f"download or save it again, or {fix}."
        )
    return CheckpointError(
        f"{path} is not a PyTorch checkpoint (torch.load failed: {_reason(exc)}); it may be truncated, "
        f"corrupt or another kind of file; {fix}."
    )


def _needs_code_execution(path: Path, exc: Exception) -> str | None:
    """Why a weights-only load of a well-formed pickle was refused (what it references), None for no pickle.

    torch's message alone cannot tell: random bytes and a pickle of `os.system` both raise
    `UnpicklingError`, so the file is parsed again without importing or calling anything.
    """
    message = str(exc)
    if isinstance(exc, RuntimeError) and "weights_only" in message:  # TorchScript or legacy .tar archives
        return _reason(exc)
    if not isinstance(exc, pickle.UnpicklingError):  # the weights-only unpickler refuses with this type only
        return None
    referenced = _pickle_globals(path)
    if referenced is None:
        return None
    refused = _REFUSED_GLOBAL_RE.search(message)
    if refused:
        return f"it references {refused.group(1) or refused.group(2)}"
    foreign = [name for name in referenced if name.split(".", 1)[0] not in _PLAIN_MODULES]
    if foreign:
        return "it references " + ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
    return _reason(exc)


class _Stub:
    """Stands in for every class and function a pickle names, so parsing it runs no code of the file's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, item: Any) -> None:
        pass

    def extend(self, items: Any) -> None:
        pass


class _StubUnpickler(pickle.Unpickler):
    """Python's "restricting globals" unpickler taken to the end: no global is ever imported."""

    def __init__(self, file: Any) -> None:
        super().__init__(file, encoding="latin1")
        self.referenced: list[str] = []

    def find_class(self, module: str, name: str) -> type:
        full_name = f"{module}.{name}"
        if full_name not in self.referenced:
            self.referenced.append(full_name)
        return _Stub

    def persistent_load(self, pid: Any) -> None:  # tensor storages of torch's zip format
        return None


def _pickle_globals(path: Path) -> list[str] | None:
    """The globals a pickle file (or torch zip's `data.pkl`) names, in order; None when it is no pickle."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                records = [name for name in archive.namelist() if name.rsplit("/", 1)[-1] == "data.pkl"]
                if not records:
                    return None
                with archive.open(records[0]) as handle:
                    return _stub_load(handle)
        with path.open("rb") as handle:
            return _stub_load(handle)
    except Exception:  # any failure to parse means "not a pickle"
        return None


def _stub_load(handle: Any) -> list[str]:
    unpickler = _StubUnpickler(handle)
    unpickler.load()
    return unpickler.referenced


def _reason(exc: BaseException) -> str:
    """One short line of what a loader said: torch's own error behind its weights-only banner, no ANSI."""
    inner = exc.__context__
    if isinstance(exc, pickle.UnpicklingError) and isinstance(inner, pickle.UnpicklingError):
        exc = inner  # torch wraps the unpickler's error in a paragraph about weights_only
    lines = [line.strip() for line in _ANSI_RE.sub("", str(exc)).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if len(text) > _MAX_REASON:
        text = text.split(". ")[0]
    if len(text) > _MAX_REASON:
        text = text[: _MAX_REASON - 3] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def sha256_file(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in chunks (provenance of the exact weights used)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()
