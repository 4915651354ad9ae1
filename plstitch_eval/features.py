"""Feature store: one safetensors file per video plus `manifest.json`, written atomically.

Layout of a store folder::

    manifest.json            dataset, splits, class names, model spec + provenance, preprocessing, fps, ...,
                             and `video_frames`: the frame count of every video written so far
                             (`black_margins`: each video's picture box, with `--crop-black-margin`)
    <video>.safetensors      features [T, D] float32, labels [T] int64, frame_times [T] float64 (seconds)
    .locks/                  lock files of concurrent writers (see below); not part of the features

Labels are -1 (unlabelled) or an index into the manifest's `class_names`; evaluation refuses any other value.

A store is tied to one (model, preprocessing, fps, dataset) combination - its *compatibility key*; writing
features made another way into an existing store is refused unless the caller overwrites it.

Several processes may write one store at once: the manifest's read-modify-write happens under the store's
lock (`store_lock`), and an extraction claims each video it encodes (`claim_video`). Both are `flock` locks on
files in `.locks/`, so a killed process releases them with its open files; no stale lock is left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import struct
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import atomic_path, write_json_atomic

try:
    import fcntl
except ImportError:  # Windows: no flock; concurrent writers of one store are then not coordinated
    fcntl = None  # type: ignore[assignment]

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
COMPAT_FIELDS = ("dataset", "model_spec", "weights_sha256", "preprocessing", "fps")
VIDEO_FRAMES = "video_frames"  # manifest key: {video: frames written}, kept by the store itself
BLACK_MARGINS = "black_margins"  # manifest key: {video: picture box} of a `--crop-black-margin` extraction
PER_VIDEO_KEYS = (VIDEO_FRAMES, BLACK_MARGINS)  # {video: ...} records a resumed store keeps
LOCK_DIR = ".locks"
STORE_LOCK = "store.lock"
TENSORS = {"features": ("F32", 2), "labels": ("I64", 1), "frame_times": ("F64", 1)}  # name: (dtype, ndim)
OPTIONAL_TENSORS = {"tools": ("I8", 2)}  # tool presence, in stores of datasets with tool annotations
DTYPE_BYTES = {"F32": 4, "I64": 8, "F64": 8, "I8": 1}
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit


@dataclass
class VideoFeatures:
    """Per-frame features of one video with their labels and presentation times (and, for datasets with
    instrument annotations, tool presence per frame: the manifest's `tool_names`)."""

    video: str
    features: np.ndarray  # [T, D] float32
    labels: np.ndarray  # [T] int64 class ids (-1 = unlabelled)
    frame_times: np.ndarray  # [T] float64 seconds
    tools: np.ndarray | None = None  # [T, K] int8 0/1 (-1 = not annotated); None: no tool labels

    def __post_init__(self) -> None:
        n = len(self.features)
        if self.features.ndim != 2:
            raise FeatureStoreError(
                f"Video {self.video!r}: features must be [T, D], got {self.features.shape}."
            )
        if len(self.labels) != n or len(self.frame_times) != n:
            raise FeatureStoreError(
                f"Video {self.video!r}: {n} feature rows but {len(self.labels)} labels and "
                f"{len(self.frame_times)} frame times; all three must have one entry per frame."
            )
        if self.tools is not None and (self.tools.ndim != 2 or len(self.tools) != n):
            raise FeatureStoreError(
                f"Video {self.video!r}: tool labels must be [T, K] with one row per frame, got "
                f"{self.tools.shape} for {n} frames."
            )


def compat_key(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest fields that must agree for two extraction runs to share a store."""
    model = manifest.get("model", {})
    return {
        "dataset": manifest.get("dataset"),
        "model_spec": model.get("spec"),
        "weights_sha256": model.get("provenance", {}).get("sha256"),
        "preprocessing": manifest.get("preprocessing"),
        "fps": manifest.get("fps"),
    }


def manifest_differences(
    old: dict[str, Any], new: dict[str, Any], also_compare: Sequence[str] = ()
) -> list[str]:
    """`key: old -> new` for every differing leaf of the compatibility key (nested keys dotted, e.g.
    `preprocessing.crop_pct`) and of the top-level fields `also_compare`; empty when the stores agree."""
    pairs: list[str] = []

    def walk(a: Any, b: Any, key: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b), key=str):
                walk(a.get(k), b.get(k), f"{key}.{k}")
        elif a != b:
            pairs.append(f"{key}: {_shown(a)} -> {_shown(b)}")

    old_key, new_key = compat_key(old), compat_key(new)
    for field in (*old_key, *also_compare):
        if field in old_key:
            walk(old_key[field], new_key[field], field)
        else:
            walk(old.get(field), new.get(field), field)
    return pairs


def _shown(value: Any) -> str:
    """A manifest value on one line: strings verbatim, None as `(none)`, the rest as JSON."""
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return " ".join(text.splitlines())


def store_owned(path: Path) -> bool:
    """Whether `path`, an entry of a store folder, is one a store writes: the lock folder, a feature file, a
    manifest or feature file being written (`.NAME.XXXX.tmp`), a folder of such files (videos named with
    folders). Why: a store that lost its manifest holds only these; anything else is not ours to delete."""
    name = path.name
    if name.startswith(".") and name.endswith(".tmp"):
        return name.startswith(f".{MANIFEST}.") or ".safetensors." in name
    try:
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            return name == LOCK_DIR or (not name.startswith(".") and all(map(store_owned, path.iterdir())))
    except FileNotFoundError:  # removed meanwhile (a run starting the store again): judged by its name
        return name.endswith(".safetensors")
    return stat.S_ISREG(mode) and name.endswith(".safetensors") and not name.startswith(".")


# ------------------------------------------------------------------------------------------------- locks


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


# ---------------------------------------------------------------------------------------- file headers


def file_state(path: str | os.PathLike) -> tuple[int, int, int] | None:
    """(inode, mtime ns, size) of `path`, None when it does not exist: a file replaced by an atomic write
    (a rename) gets a new state."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def read_shapes(path: str | os.PathLike) -> tuple[int, int]:
    """(frames T, feature dim D) of a stored video from its safetensors header alone; a FeatureStoreError
    (message: what is wrong, without the path) when the header does not parse, lacks or misshapes a tensor, or
    the file is shorter or longer than the header says (a truncated copy, a write cut short)."""
    size = os.path.getsize(path)
    with open(path, "rb") as file:
        head = file.read(8)
        if len(head) < 8:
            raise FeatureStoreError(f"{size} bytes, shorter than a safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, MAX_HEADER_BYTES):
            raise FeatureStoreError(f"header of {n} bytes in a file of {size} bytes")
        try:
            header = json.loads(file.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FeatureStoreError(f"header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise FeatureStoreError("header is not a JSON object")
    missing = sorted(set(TENSORS) - set(header))
    if missing:
        raise FeatureStoreError(f"lacks tensors {', '.join(missing)}")
    end = 0
    shapes: dict[str, list[int]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, stop) = info["dtype"], [int(d) for d in info["shape"]], info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise FeatureStoreError(f"header entry of {name!r} is malformed") from None
        want_dtype, want_ndim = {**TENSORS, **OPTIONAL_TENSORS}.get(name, (dtype, len(shape)))
        if dtype != want_dtype or len(shape) != want_ndim:
            raise FeatureStoreError(f"{name} is {dtype} {shape}, expected {want_dtype} with {want_ndim} dims")
        if dtype in DTYPE_BYTES and stop - begin != int(np.prod(shape, dtype=np.int64)) * DTYPE_BYTES[dtype]:
            raise FeatureStoreError(f"{name} {shape} does not match its {stop - begin} data bytes")
        shapes[name] = shape
        end = max(end, stop)
    if size < 8 + n + end:
        raise FeatureStoreError(f"truncated: {size} of the {8 + n + end} bytes its header describes")
    if size > 8 + n + end:
        raise FeatureStoreError(f"{size - 8 - n - end} bytes beyond the data its header describes")
    frames, dim = shapes["features"]
    labels, times = shapes["labels"][0], shapes["frame_times"][0]
    if labels != frames or times != frames:
        raise FeatureStoreError(f"features have {frames} rows, labels {labels}, frame_times {times}")
    if "tools" in shapes and shapes["tools"][0] != frames:
        raise FeatureStoreError(f"features have {frames} rows, tools {shapes['tools'][0]}")
    return frames, dim


# ------------------------------------------------------------------------------------------------ store


class FeatureStore:
    """A folder of per-video feature files with a manifest describing how they were made."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @classmethod
    def create(
        cls,
        root: str | Path,
        manifest: dict[str, Any],
        overwrite: bool = False,
        also_compare: Sequence[str] = (),
    ) -> FeatureStore:
        """Open `root` for writing with `manifest`; refuse to mix with an incompatible existing store (the
        compatibility key and the top-level fields `also_compare` must agree) unless `overwrite`, which
        deletes its features (also those of a store whose manifest was lost: its `store_owned` entries,
        nothing else). Resuming keeps the creation time and the records of the videos written
        (`PER_VIDEO_KEYS`)."""
        store = cls(root)
        store.root.mkdir(parents=True, exist_ok=True)
        with store_lock(store.root):
            manifest = {k: v for k, v in manifest.items() if k not in ("format_version", *PER_VIDEO_KEYS)}
            recorded: dict[str, Any] = {VIDEO_FRAMES: {}}
            if (store.root / MANIFEST).exists():
                old = store.manifest
                differences = manifest_differences(old, manifest, also_compare)
                if differences and not overwrite:
                    raise FeatureStoreError(
                        f"{store.root} already holds features made differently "
                        f"({'; '.join(differences)}; as stored -> this run). "
                        "Use another --out folder, or --overwrite to delete the old features."
                    )
                if differences:
                    store._clear()
                else:
                    recorded.update({key: dict(old[key] or {}) for key in PER_VIDEO_KEYS if key in old})
                    if "created" in old:
                        manifest["created"] = old["created"]
            elif overwrite:  # features without a manifest: nobody knows how they were made
                store._clear(only_owned=True)
            store.write_manifest({**manifest, **recorded})
        return store

    def _clear(self, only_owned: bool = False) -> None:
        """Delete everything in the store but its lock files (other processes may hold them); `only_owned`:
        only what `store_owned` calls a store's."""
        for entry in self.root.iterdir():
            if entry.name == LOCK_DIR or (only_owned and not store_owned(entry)):
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    @property
    def manifest(self) -> dict[str, Any]:
        """The parsed manifest.json of this store."""
        path = self.root / MANIFEST
        if not path.exists():
            raise FeatureStoreError(
                f"{self.root} is not a feature store (no {MANIFEST}); create one with `plstitch extract`."
            )
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise FeatureStoreError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}.") from exc

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write the manifest atomically."""
        write_json_atomic(self.root / MANIFEST, {"format_version": FORMAT_VERSION, **manifest})

    def record_frames(self, frames: dict[str, int]) -> None:
        """Add `{video: frames}` to the manifest's `video_frames` (see `record_per_video`)."""
        self.record_per_video(VIDEO_FRAMES, {k: int(v) for k, v in frames.items()})

    def record_per_video(self, key: str, values: Mapping[str, Any]) -> None:
        """Merge `{video: value}` into the manifest's `key` under the store lock, so that concurrent writers
        keep each other's entries (a store without a manifest records nothing)."""
        if not values or not (self.root / MANIFEST).exists():
            return
        with store_lock(self.root):
            manifest = self.manifest
            recorded = {**(manifest.get(key) or {}), **values}
            manifest[key] = dict(sorted(recorded.items()))
            self.write_manifest(manifest)

    @property
    def class_names(self) -> list[str]:
        """Class names, index = label id."""
        return list(self.manifest.get("class_names", []))

    def splits(self) -> dict[str, list[str]]:
        """Split name -> video names, as recorded at extraction time."""
        return {k: list(v) for k, v in self.manifest.get("splits", {}).items()}

    def path(self, video: str) -> Path:
        """File that holds `video`'s features."""
        return self.root / f"{video}.safetensors"

    def has(self, video: str) -> bool:
        """Whether `video` has a file (atomic writes make it complete when written; `check` verifies it)."""
        return self.path(video).exists()

    def check(self, video: str, manifest: dict[str, Any] | None = None) -> str | None:
        """Why `video`'s file cannot be used, or None when it can. Cheap: reads the safetensors header only
        (tensors, dtypes, shapes, file length) and compares the feature dim and the frame count with what the
        manifest (`manifest`, else this store's) recorded."""
        manifest = self.manifest if manifest is None else manifest
        try:
            frames, dim = read_shapes(self.path(video))
        except FeatureStoreError as exc:
            return str(exc)
        except OSError as exc:
            return exc.strerror or str(exc)
        want_dim = manifest.get("feature_dim")
        if want_dim is not None and dim != want_dim:
            return f"{dim} features per frame, the manifest says {want_dim}"
        want_frames = (manifest.get(VIDEO_FRAMES) or {}).get(video)
        if want_frames is not None and frames != want_frames:
            return f"{frames} frames, the manifest recorded {want_frames}"
        return None

    def videos(self) -> list[str]:
        """Names of all videos with a feature file, sorted."""
        return sorted(
            str(p.relative_to(self.root).with_suffix(""))
            for p in self.root.rglob("*.safetensors")
            if not p.name.startswith(".")
        )

    def write(self, item: VideoFeatures) -> None:
        """Write one video's features atomically (temp file, then rename) and record its frame count."""
        tensors = {
            "features": np.ascontiguousarray(item.features, dtype=np.float32),
            "labels": np.ascontiguousarray(item.labels, dtype=np.int64),
            "frame_times": np.ascontiguousarray(item.frame_times, dtype=np.float64),
        }
        if item.tools is not None:
            tensors["tools"] = np.ascontiguousarray(item.tools, dtype=np.int8)
        with atomic_path(self.path(item.video)) as tmp:
            save_file(tensors, str(tmp), metadata={"video": item.video})
        self.record_frames({item.video: len(item.features)})

    def read(self, video: str) -> VideoFeatures:
        """Read one video's features; a missing video names the store and the fix."""
        path = self.path(video)
        if not path.exists():
            raise FeatureStoreError(f"{path} not found: video {video!r} has no features in {self.root}.")
        try:
            tensors = load_file(str(path))
        except Exception as exc:  # safetensors raises its own error types
            raise FeatureStoreError(
                f"{path} is not a readable safetensors file ({exc}); rerun the `plstitch extract` command "
                f"that made this store (--videos {video} for this video alone) to extract it again."
            ) from exc
        missing = {"features", "labels", "frame_times"} - set(tensors)
        if missing:
            raise FeatureStoreError(
                f"{path} lacks tensors {sorted(missing)}; rerun the `plstitch extract` command that made "
                f"this store (--videos {video} for this video alone) to extract it again."
            )
        tools = tensors.get("tools")
        return VideoFeatures(video, tensors["features"], tensors["labels"], tensors["frame_times"], tools)

    def read_many(self, videos: Iterable[str]) -> list[VideoFeatures]:
        """Read several videos in the given order."""
        return [self.read(v) for v in videos]

    def read_split(self, split: str) -> list[VideoFeatures]:
        """Read every video of a recorded split."""
        splits = self.splits()
        if split not in splits:
            raise FeatureStoreError(
                f"{self.root / MANIFEST} has no split {split!r}; recorded splits: {sorted(splits) or 'none'}."
            )
        return self.read_many(splits[split])
