"""How a damaged feature store is noticed and mended: the sha256 of each feature file, recorded in the
manifest when the file is written (`CHECKSUMS`) and checked by every reader and by a resumed extraction, and
the `plstitch extract` command that extracts videos again (`redo_command`), which every error about a stored
video's contents gives.

Why: a file damaged after it was written (a bad disk, a copy cut short, bytes flipped) keeps its size and its
header, so only a checksum notices it; and "re-extract it" helps only with the command that does.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plstitch_eval.utils.console import logger

CHECKSUMS = "sha256"  # manifest key: {video: sha256 of its feature file as written}
VIDEO_FRAMES = "video_frames"  # manifest key: {video: frames written}, kept by the store itself
FEATURE_SUFFIX = ".safetensors"  # a video's feature file: <store>/<video>.safetensors
_CHUNK = 1 << 20
_noted: set[str] = set()


def sha256_hex(data: bytes) -> str:
    """The sha256 of `data` as hex (hashlib's: about 1.5 GB/s on one core with SHA extensions)."""
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    """The sha256 of the file at `path` as hex, read in 1 MiB pieces."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while piece := file.read(_CHUNK):
            digest.update(piece)
    return digest.hexdigest()


def recorded_sha256(manifest: Mapping[str, Any], video: str) -> str | None:
    """The sha256 the manifest recorded for `video`'s file, None when it records none (an older store)."""
    value = (manifest.get(CHECKSUMS) or {}).get(video)
    return value if isinstance(value, str) else None


def feature_path(root: str | os.PathLike, video: str) -> Path:
    """The file that holds `video`'s features in the store at `root`."""
    return Path(root) / f"{video}{FEATURE_SUFFIX}"


def was_written(manifest: Mapping[str, Any], video: str) -> bool:
    """True when the manifest records `video`'s file as written (its frame count or sha256): a file it
    records that is gone was deleted or moved, not left out by `--split` / `--videos`."""
    return any(video in (manifest.get(key) or {}) for key in (VIDEO_FRAMES, CHECKSUMS))


def mismatch(got: str, want: str) -> str:
    """Why a file whose sha256 is `got` is not the one written (`want`): follows the path or "its bytes"."""
    return f"changed after it was written (sha256 {got[:12]}…, the manifest recorded {want[:12]}…)"


def note_unverified(root: str | os.PathLike, video: str) -> None:
    """Note once per store (stderr) that a file read has no recorded checksum (a store made by an older
    plstitch), so it is read unverified."""
    key = str(Path(root).resolve())
    if key in _noted:
        return
    _noted.add(key)
    logger.info(
        "note: %s records no checksum of %s's features (a store made by an older plstitch), so damage to its "
        "files goes unnoticed; rerun the `plstitch extract` command that made it to record them.",
        root,
        video,
    )


def redo_command(root: str | os.PathLike, manifest: Mapping[str, Any], videos: Sequence[str]) -> str:
    """The `plstitch extract` command that extracts `videos` of the store at `root` again (`--redo`)."""
    return extract_command(root, manifest, ["--redo", ",".join(videos)])


def extract_command(root: str | os.PathLike, manifest: Mapping[str, Any], selection: Sequence[str]) -> str:
    """The `plstitch extract` command into the store at `root` with the dataset, model, fps, precision and
    decoding settings its manifest records, then `selection` (e.g. `--redo v1` or `--split train`)."""
    model = manifest.get("model") or {}
    preprocessing = manifest.get("preprocessing") or {}
    words = ["plstitch", "extract", "--dataset", str(manifest.get("dataset") or "DATASET")]
    dataset_root = manifest.get("dataset_root")
    if dataset_root and manifest.get("dataset") != "synthetic":  # the synthetic set finds its own cache
        words += ["--root", str(dataset_root)]
    words += ["--model", str(model.get("spec") or "MODEL")]
    for flag, key in (("--fps", "fps"), ("--precision", "precision")):
        if manifest.get(key) is not None:
            words += [flag, f"{manifest[key]:g}" if isinstance(manifest[key], float) else str(manifest[key])]
    if isinstance(preprocessing, Mapping):
        words += ["--resize-on-decode"] if preprocessing.get("resize_on_decode") else []
        words += ["--crop-black-margin"] if preprocessing.get("crop_black_margin") else []
        words += ["--decoder", str(preprocessing["decoder"])] if preprocessing.get("decoder") else []
        words += ["--frames", "FRAME_CACHE"] if preprocessing.get("frames") else []
    words += ["--out", str(root), *selection]
    return " ".join(shlex.quote(word) for word in words)


def deleted_message(root: str | os.PathLike, manifest: Mapping[str, Any], deleted: Sequence[str]) -> str:
    """One line for feature files the manifest records as written that are gone: the file (or how many and
    the first few), and the command that extracts them again (`--redo` names up to 10; a resume without it
    extracts every missing file too)."""
    command = extract_command(root, manifest, ["--redo", ",".join(deleted)] if len(deleted) <= 10 else [])
    if len(deleted) == 1:
        frames = (manifest.get(VIDEO_FRAMES) or {}).get(deleted[0])
        recorded = f" ({frames} frames)" if frames else ""
        return (
            f"{feature_path(root, deleted[0])} is missing: the manifest records it as extracted{recorded}, "
            f"so it was deleted or moved since; extract it again (the other videos are kept): {command}"
        )
    paths = [str(feature_path(root, video)) for video in deleted]
    shown = ", ".join(paths[:3]) + (f", ... ({len(paths)} files)" if len(paths) > 3 else "")
    return (
        f"{len(paths)} feature files of {root} are missing ({shown}): the manifest records them as "
        f"extracted, so they were deleted or moved since; extract them again (the other videos are kept): "
        f"{command}"
    )


def missing_message(root: str | os.PathLike, manifest: Mapping[str, Any], missing: Sequence[str]) -> str:
    """One line for videos the store has no file of: files the manifest records as written are named as
    deleted, with the command that extracts them again (`deleted_message`); others were left out by `--split`
    or `--videos`: the split that holds them, and the command that adds them (the others are kept)."""
    deleted = [video for video in missing if was_written(manifest, video)]
    if deleted:
        return deleted_message(root, manifest, deleted)
    default = str(manifest.get("split_scheme") or "")
    schemes = manifest.get("split_schemes") or {default: manifest.get("splits") or {}}
    wanted = set(missing)
    holders = [  # each recorded split holding every missing video: the default scheme's first, the smallest
        (scheme != default, len(names), str(scheme), str(split))
        for scheme, splits in schemes.items()
        for split, names in (splits or {}).items()
        if names and wanted <= set(names)
    ]
    shown = ", ".join(missing[:5]) + (f", ... ({len(missing)} videos)" if len(missing) > 5 else "")
    if holders:
        other, _, scheme, split = min(holders)
        what = f"split {split!r}" + (f" of scheme {scheme!r}" if other else "")
        selection = ["--split", split] + (["--split-scheme", scheme] if other else [])
        return (
            f"{root} lacks videos of {what} ({shown}): the store was extracted with --split or --videos; "
            f"add the split (the videos it has are kept): {extract_command(root, manifest, selection)}"
        )
    selection = ["--videos", ",".join(missing)] if len(missing) <= 10 else []
    return (
        f"{root} has no features of {shown}: the store was extracted with --split or --videos; add them (the "
        f"videos it has are kept): {extract_command(root, manifest, selection)}"
    )
