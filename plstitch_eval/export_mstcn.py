"""Export a feature store in the MS-TCN / ASFormer data layout.

Layout written under `out`::

    features/<video>.npy        float32 (D, T)  - MS-TCN loads np.load(...)[:, ::sample_rate]
    groundTruth/<video>.txt     one class name per line, one line per frame
    mapping.txt                 "<id> <name>" per line, ids = the store's class ids (spaces in names -> _)
    splits/{train,val,test}.splitN.bundle   one "<video>.txt" per line (MS-TCN's bundle convention)
    plstitch_mstcn.json         the record: the store and every file above (MS-TCN ignores it)

Split scheme i of the store (in manifest order) becomes `splitI`; a scheme named `splitN` keeps its N.

The folder is written beside `out` and renamed onto it, so a failed export leaves nothing. `out` must be new,
empty, or an earlier export (its record): a folder holding anything the record does not list is refused
naming the first such file, and an earlier export is replaced only with `overwrite`.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval import __version__
from plstitch_eval.errors import ConfigError, FeatureStoreError
from plstitch_eval.store.features import MANIFEST, FeatureStore
from plstitch_eval.utils.io import atomic_path, temp_dir_beside, write_json_atomic, write_text_atomic
from plstitch_eval.utils.outputs import REPLACED_FOLDER, check_output_path, foreign_message, replace_folder

RECORD = "plstitch_mstcn.json"  # what an export wrote: all that `--overwrite` may replace
RECORD_SCHEMA = "plstitch.mstcn-export/v1"


@dataclass
class MstcnExport:
    """What `export_mstcn` wrote."""

    out: Path
    videos: int
    feature_dim: int
    bundles: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "out": str(self.out),
            "videos": self.videos,
            "feature_dim": self.feature_dim,
            "bundles": self.bundles,
        }


def split_number(scheme: str, position: int) -> int:
    """N in `splitN` file names: the scheme's own number if it is named `splitN`, else its position."""
    match = re.fullmatch(r"split[_-]?(\d+)", scheme)
    return int(match.group(1)) if match else position


def store_schemes(manifest: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """Split schemes recorded in a manifest (`split_schemes`, else the single `splits`)."""
    schemes = manifest.get("split_schemes")
    if schemes:
        return {str(k): dict(v) for k, v in schemes.items()}
    splits = manifest.get("splits") or {}
    return {str(manifest.get("split_scheme") or "split1"): dict(splits)} if splits else {}


def mstcn_name(name: str) -> str:
    """A class name without whitespace (MS-TCN splits mapping.txt lines on it): spaces become underscores."""
    return "_".join(name.split())


def ground_truth_lines(labels: np.ndarray, class_names: list[str], video: str) -> str:
    """groundTruth text: one class name per frame; unlabelled (-1) or unknown ids are an error."""
    bad = (labels < 0) | (labels >= len(class_names))
    if bad.any():
        first = int(np.argmax(bad))
        raise FeatureStoreError(
            f"Video {video!r}: {int(bad.sum())} frame(s) have no valid class id (first at frame {first}, "
            f"id {int(labels[first])}); MS-TCN needs a class for every frame - re-extract with annotations."
        )
    return "".join(f"{class_names[i]}\n" for i in labels.tolist())


def recorded_files(out: Path) -> set[str] | None:
    """The files an earlier export recorded in `out` (relative POSIX paths, the record included), or None
    where `out` holds no record; a record that cannot be read is refused (what is ours is then unknown)."""
    path = out / RECORD
    if not path.is_file() or path.is_symlink():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    files = (
        record.get("files") if isinstance(record, dict) and record.get("schema") == RECORD_SCHEMA else None
    )
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        raise ConfigError(
            f"--out {out}: {RECORD} is no export-mstcn record (schema {RECORD_SCHEMA} with its files), so "
            f"what plstitch wrote there is unknown; choose another --out (or move {RECORD} out of it)."
        )
    return {*files, RECORD}


def first_foreign(folder: Path, own: set[str]) -> Path | None:
    """The first entry under `folder` (sorted, depth first) that is not in `own` (paths relative to `folder`);
    a sub-folder is ours when a file of `own` lies in it, a link never is."""
    own_folders = {parent.as_posix() for name in own for parent in Path(name).parents if parent.name}

    def search(current: Path) -> Path | None:
        for entry in sorted(current.iterdir()):
            relative = entry.relative_to(folder).as_posix()
            if entry.is_symlink():
                return entry
            if entry.is_dir():
                found = search(entry)
                if found is not None or relative not in own_folders:
                    return found or entry  # a foreign file inside, or a folder of nothing of ours
            elif relative not in own:
                return entry
        return None

    return search(folder)


def check_export_folder(out: Path, overwrite: bool) -> None:
    """Refuse an `out` that holds anything an earlier export did not record (naming the first such file),
    and an earlier export without `overwrite`; a new or empty folder passes."""
    if not out.is_dir() or not any(out.iterdir()):
        return
    recorded = recorded_files(out)
    found = first_foreign(out, recorded or set())
    if found is not None:
        raise ConfigError(
            foreign_message(out, found, "--out", None if recorded is None else "an MS-TCN export")
        )
    if not overwrite:
        raise ConfigError(
            f"--out {out} holds an MS-TCN export ({RECORD}); pass --overwrite to replace it, or choose "
            "another --out."
        )


def export_mstcn(
    store_path: str | Path, out: str | Path, split_scheme: str | None = None, overwrite: bool = False
) -> MstcnExport:
    """Write `features/`, `groundTruth/`, `mapping.txt`, `splits/` and the record for MS-TCN from a feature
    store: into a folder beside `out`, renamed onto it once complete (`overwrite`: replacing an earlier
    export; see the module's docstring)."""
    out = check_output_path(out, "--out", REPLACED_FOLDER)
    check_export_folder(out, overwrite)  # before the store is read: nothing of a user's is written over
    store = FeatureStore(store_path)
    class_names = store.class_names
    if not class_names:
        raise FeatureStoreError(f"{store.root / MANIFEST} lists no class_names; re-extract the store.")
    schemes = store_schemes(store.manifest)
    if split_scheme is not None:
        if split_scheme not in schemes:
            raise ConfigError(
                f"{store.root / MANIFEST} has no split scheme {split_scheme!r}; recorded: {sorted(schemes)}."
            )
        schemes = {split_scheme: schemes[split_scheme]}
    videos = store.videos()
    if not videos:
        raise FeatureStoreError(f"{store.root} holds no feature files; run `plstitch extract` first.")
    target = out.resolve()  # a link to a folder keeps naming the export
    tmp = temp_dir_beside(target)
    try:
        names = [mstcn_name(n) for n in class_names]
        feature_dim, bundles, files = write_layout(store, videos, tmp, names, schemes)
        record = {
            "schema": RECORD_SCHEMA,
            "plstitch_version": __version__,
            "store": str(store.root.resolve()),
        }
        write_json_atomic(tmp / RECORD, {**record, "split_scheme": split_scheme, "files": files})
        check_export_folder(out, overwrite)  # again: a file someone put there meanwhile is not replaced
        replace_folder(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return MstcnExport(out=out, videos=len(videos), feature_dim=feature_dim, bundles=bundles)


def write_layout(
    store: FeatureStore,
    videos: list[str],
    folder: Path,
    class_names: list[str],
    schemes: dict[str, dict[str, list[str]]],
) -> tuple[int, list[str], list[str]]:
    """Write the MS-TCN layout of `videos` (those of `store`) into `folder`; returns the feature dimension,
    the bundles' names and every file written (relative POSIX paths)."""
    files: list[str] = []
    feature_dim = 0
    for video in videos:
        item = store.read(video)
        feature_dim = item.features.shape[1]
        with atomic_path(folder / "features" / f"{video}.npy") as tmp, open(tmp, "wb") as handle:
            np.save(handle, np.ascontiguousarray(item.features.T, dtype=np.float32))
        text = ground_truth_lines(item.labels, class_names, video)
        write_text_atomic(folder / "groundTruth" / f"{video}.txt", text)
        files += [f"features/{video}.npy", f"groundTruth/{video}.txt"]
    write_text_atomic(folder / "mapping.txt", "".join(f"{i} {name}\n" for i, name in enumerate(class_names)))
    files.append("mapping.txt")
    present = set(videos)
    bundles = []
    for position, (scheme, splits) in enumerate(schemes.items(), start=1):
        number = split_number(scheme, position)
        for split, names in splits.items():
            kept = [n for n in names if n in present]
            if not kept:
                continue
            name = f"{split}.split{number}.bundle"
            write_text_atomic(folder / "splits" / name, "".join(f"{n}.txt\n" for n in kept))
            bundles.append(name)
            files.append(f"splits/{name}")
    return feature_dim, bundles, files
