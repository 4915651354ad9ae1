"""Feature store: one safetensors file per video plus `manifest.json`, written atomically.

Layout of a store folder::

    manifest.json            dataset, splits, class names, model spec + provenance, preprocessing, fps, ...,
                             `video_frames`: the frame count of every video written so far, `sha256`: the
                             checksum of each video's file as written (`store_repair`; readers and a resumed
                             extraction verify it; stores made before it record none and read unverified)
                             (`black_margins`: each video's picture box, with `--crop-black-margin`)
    <video>.safetensors      features [T, D] float32, labels [T] int64, frame_times [T] float64 (seconds);
                             with a dataset's annotations also tools [T, K] int8 (the manifest's `tool_names`)
                             and triplets [T, 100] int8 (its `triplet_names`, CholecT50/CholecT45), and
                             cvs [T, 3] float32 (the raters' mean of its `cvs_names`, NaN: frame not rated)
    .locks/                  lock files of concurrent writers (see below); not part of the features

Labels are -1 (unlabelled) or an index into the manifest's `class_names`; evaluation refuses any other value.

A store is tied to one (model, preprocessing, fps, dataset) combination - its *compatibility key*; writing
features made another way into an existing store is refused unless the caller overwrites it.

Several processes may write one store at once: the manifest's read-modify-write happens under the store's
lock (`store_lock`), and an extraction claims each video it encodes (`claim_video`): `store_locks`.
`--overwrite` deletes only what a store writes (`STORE_FILES`) and refuses a folder holding anything else.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load, save_file

from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.store.locks import (  # noqa: F401 - the lock names are this module's API too
    LOCK_DIR,
    STORE_LOCK,
    VideoClaim,
    claim_video,
    store_lock,
)
from plstitch_eval.store.repair import (
    CHECKSUMS,
    VIDEO_FRAMES,
    feature_path,
    file_sha256,
    mismatch,
    missing_message,
    note_unverified,
    recorded_sha256,
    redo_command,
    sha256_hex,
    was_written,
)
from plstitch_eval.utils.io import atomic_path, write_json_atomic
from plstitch_eval.utils.outputs import OwnedFiles

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
COMPAT_FIELDS = ("dataset", "model_spec", "weights_sha256", "preprocessing", "fps")
BLACK_MARGINS = "black_margins"  # manifest key: {video: picture box} of a `--crop-black-margin` extraction
PER_VIDEO_KEYS = (VIDEO_FRAMES, BLACK_MARGINS, CHECKSUMS)  # {video: ...} records a resumed store keeps
TENSORS = {"features": ("F32", 2), "labels": ("I64", 1), "frame_times": ("F64", 1)}  # name: (dtype, ndim)
# tool presence and action triplets (0/1, -1 = frame not annotated), in stores of datasets annotating them
# and the critical view of safety (raters' mean in [0, 1], NaN = frame not rated)
OPTIONAL_TENSORS = {"tools": ("I8", 2), "triplets": ("I8", 2), "cvs": ("F32", 2)}
DTYPE_BYTES = {"F32": 4, "I64": 8, "F64": 8, "I8": 1}
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit


@dataclass
class VideoFeatures:
    """Per-frame features of one video with their labels and presentation times (and, for datasets with
    instrument annotations, tool presence per frame: the manifest's `tool_names`; with action-triplet
    annotations, the triplets per frame: its `triplet_names`; with critical-view-of-safety ratings, the
    raters' mean per criterion: its `cvs_names`)."""

    video: str
    features: np.ndarray  # [T, D] float32
    labels: np.ndarray  # [T] int64 class ids (-1 = unlabelled)
    frame_times: np.ndarray  # [T] float64 seconds
    tools: np.ndarray | None = None  # [T, K] int8 0/1 (-1 = not annotated); None: no tool labels
    triplets: np.ndarray | None = None  # [T, 100] int8 0/1 (-1 = not annotated); None: no triplet labels
    cvs: np.ndarray | None = None  # [T, 3] float32 raters' mean (NaN = not rated); None: no CVS ratings

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
        for what, rows in (("tool", self.tools), ("triplet", self.triplets), ("CVS", self.cvs)):
            if rows is not None and (rows.ndim != 2 or len(rows) != n):
                raise FeatureStoreError(
                    f"Video {self.video!r}: {what} labels must be [T, K] with one row per frame, got "
                    f"{rows.shape} for {n} frames."
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


STORE_FILES = OwnedFiles(  # what a store writes: all `--overwrite` deletes (`utils.outputs`)
    "a feature store",
    (MANIFEST, "[!.]*.safetensors", LOCK_DIR, f".{MANIFEST}.*.tmp", ".*.safetensors.*.tmp"),
    nested=True,  # videos named with folders
)


def store_owned(path: Path) -> bool:
    """Whether `path`, an entry of a store folder, is one a store writes (`STORE_FILES`): the lock folder, a
    feature file, a manifest or feature file being written, a folder of such files. Why: a store that lost
    its manifest holds only these; anything else is not ours to delete."""
    return STORE_FILES.owns(path)


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
    for name in OPTIONAL_TENSORS:
        if name in shapes and shapes[name][0] != frames:
            raise FeatureStoreError(f"features have {frames} rows, {name} {shapes[name][0]}")
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
        deletes its features (also those of a store whose manifest was lost or is damaged: its `STORE_FILES`
        entries; a folder holding anything else is refused first). Resuming keeps the creation time and the
        records of the videos written (`PER_VIDEO_KEYS`)."""
        store = cls(root)
        store.root.mkdir(parents=True, exist_ok=True)
        with store_lock(store.root):
            manifest = {k: v for k, v in manifest.items() if k not in ("format_version", *PER_VIDEO_KEYS)}
            recorded: dict[str, Any] = {VIDEO_FRAMES: {}, CHECKSUMS: {}}
            old = store._old_manifest(overwrite)
            if old is not None:
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
            elif overwrite:  # features without a (readable) manifest: nobody knows how they were made
                store._clear()
            store.write_manifest({**manifest, **recorded})
        return store

    def _old_manifest(self, overwrite: bool) -> dict[str, Any] | None:
        """The manifest there is, None when there is none, or when it is damaged and `overwrite` starts the
        store again."""
        if not (self.root / MANIFEST).exists():
            return None
        try:
            return self.manifest
        except FeatureStoreError:
            if overwrite:
                return None
            raise

    def _clear(self) -> None:
        """Delete the store's own files (`STORE_FILES`) but its lock files (other processes may hold them);
        a folder holding anything else is refused first, deleting nothing."""
        STORE_FILES.remove(self.root, keep=(LOCK_DIR,))

    @property
    def manifest(self) -> dict[str, Any]:
        """The parsed manifest.json of this store."""
        path = self.root / MANIFEST
        if not path.exists():
            raise FeatureStoreError(
                f"{self.root} is not a feature store (no {MANIFEST}); create one with `plstitch extract`."
            )
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            where = f" at line {exc.lineno}: {exc.msg}" if isinstance(exc, json.JSONDecodeError) else ""
            raise FeatureStoreError(
                f"{path} is damaged (invalid JSON{where}): a write was cut short or the file was edited, "
                "so how these features were made is unknown; extract the store again: rerun the `plstitch "
                f"extract` command that made it with --overwrite (it deletes only the store's own files)."
            ) from exc
        if not isinstance(manifest, dict):
            raise FeatureStoreError(
                f"{path} is not a store manifest (a JSON object); rerun the `plstitch extract` command that "
                "made the store with --overwrite."
            )
        return manifest

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        """Write the manifest atomically."""
        write_json_atomic(self.root / MANIFEST, {"format_version": FORMAT_VERSION, **manifest})

    def record_frames(self, frames: dict[str, int], checksums: Mapping[str, str] | None = None) -> None:
        """Add `{video: frames}` to the manifest's `video_frames` and `{video: sha256}` to its `sha256`."""
        self.record_per_video(VIDEO_FRAMES, {k: int(v) for k, v in frames.items()}, {CHECKSUMS: checksums})

    def record_per_video(
        self, key: str, values: Mapping[str, Any], more: Mapping[str, Mapping[str, Any] | None] | None = None
    ) -> None:
        """Merge `{video: value}` into the manifest's `key` (and each of `more`'s) under the store lock, so
        that concurrent writers keep each other's entries (a store without a manifest records nothing)."""
        updates = {k: v for k, v in {key: values, **(more or {})}.items() if v}
        if not updates or not (self.root / MANIFEST).exists():
            return
        with store_lock(self.root):
            manifest = self.manifest
            for name, new in updates.items():
                manifest[name] = dict(sorted({**(manifest.get(name) or {}), **new}.items()))
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
        return feature_path(self.root, video)

    def has(self, video: str) -> bool:
        """Whether `video` has a file (atomic writes make it complete when written; `check` verifies it)."""
        return self.path(video).exists()

    def check(self, video: str, manifest: dict[str, Any] | None = None) -> str | None:
        """Why `video`'s file cannot be used, or None when it can: its safetensors header (tensors, dtypes,
        shapes, file length), the feature dim and frame count, and its sha256 against what the manifest
        (`manifest`, else this store's) recorded."""
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
        want_sha = recorded_sha256(manifest, video)
        got_sha = None if want_sha is None else file_sha256(self.path(video))
        return None if got_sha == want_sha else f"its bytes {mismatch(str(got_sha), str(want_sha))}"

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
        for name, rows in (("tools", item.tools), ("triplets", item.triplets)):
            if rows is not None:  # a store without them stays as it was: no tensor, no key
                tensors[name] = np.ascontiguousarray(rows, dtype=np.int8)
        if item.cvs is not None:
            tensors["cvs"] = np.ascontiguousarray(item.cvs, dtype=np.float32)
        with atomic_path(self.path(item.video)) as tmp:
            save_file(tensors, str(tmp), metadata={"video": item.video})
            checksum = file_sha256(tmp)
        self.record_frames({item.video: len(item.features)}, {item.video: checksum})

    def redo(self, videos: Sequence[str], manifest: Mapping[str, Any] | None = None) -> str:
        """The `plstitch extract` command that extracts `videos` of this store again (`store_repair`)."""
        return redo_command(self.root, self.manifest if manifest is None else manifest, videos)

    def read(self, video: str, manifest: dict[str, Any] | None = None) -> VideoFeatures:
        """Read one video's features, its bytes checked against the sha256 the manifest (`manifest`, else
        this store's) recorded; a missing or damaged file names the store and the command that mends it."""
        path = self.path(video)
        manifest = self._recorded() if manifest is None else manifest
        if not path.exists():
            message = missing_message(self.root, manifest, [video])  # a deleted file's names the file itself
            raise FeatureStoreError(
                message if was_written(manifest, video) else f"{path} not found; {message}"
            )
        data = path.read_bytes()
        want, problem = recorded_sha256(manifest, video), None
        if want is None:
            note_unverified(self.root, video)
        try:
            tensors = load(data)
        except Exception as exc:  # safetensors raises its own error types
            tensors, problem = {}, f"is not a readable safetensors file ({exc})"
        missing = {"features", "labels", "frame_times"} - set(tensors)
        if not problem and want is not None and (got := sha256_hex(data)) != want:
            problem = mismatch(got, want)  # same size, same header: only the checksum tells
        if problem or missing:
            raise FeatureStoreError(
                f"{path} {problem or f'lacks tensors {sorted(missing)}'}; extract it again: "
                f"{self.redo([video], manifest)}"
            )
        return VideoFeatures(
            video,
            tensors["features"],
            tensors["labels"],
            tensors["frame_times"],
            tensors.get("tools"),
            tensors.get("triplets"),
            tensors.get("cvs"),
        )

    def _recorded(self) -> dict[str, Any]:
        """The manifest, or {} for a folder of feature files without one (read, but nothing verified)."""
        return self.manifest if (self.root / MANIFEST).exists() else {}

    def read_many(self, videos: Iterable[str]) -> list[VideoFeatures]:
        """Read several videos in the given order (the manifest read once); videos without a file are named
        together, with the command that adds them."""
        manifest, videos = self._recorded(), list(videos)
        missing = [v for v in videos if not self.path(v).exists()]
        if missing:
            raise FeatureStoreError(missing_message(self.root, manifest, missing))
        return [self.read(v, manifest) for v in videos]

    def read_split(self, split: str) -> list[VideoFeatures]:
        """Read every video of a recorded split."""
        splits = self.splits()
        if split not in splits:
            raise FeatureStoreError(
                f"{self.root / MANIFEST} has no split {split!r}; recorded splits: {sorted(splits) or 'none'}."
            )
        return self.read_many(splits[split])
