"""The feature store side of a run: its manifest (`build_manifest`, `preprocessing_record`), opening or
resuming the store (`check_out_folder`, `open_store`) and planning which videos are still to do
(`plan_videos`).

A video already in the store is skipped only when its file checks out (`FeatureStore.check`: safetensors
header, shapes, the frame count and sha256 the manifest recorded) and `--redo` does not name it; a damaged
one is extracted again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval import __version__
from plstitch_eval.data.datasets import DatasetAdapter, VideoRecord
from plstitch_eval.data.decoders import PYAV, Decoding
from plstitch_eval.data.margin import detection_record
from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.extract.chunks import VideoJob
from plstitch_eval.extract.summary import VideoResult
from plstitch_eval.preprocess import FramePlan
from plstitch_eval.store.features import (
    LOCK_DIR,
    MANIFEST,
    STORE_FILES,
    VIDEO_FRAMES,
    FeatureStore,
    file_state,
    read_shapes,
    store_lock,
    store_owned,
)
from plstitch_eval.store.repair import CHECKSUMS, file_sha256
from plstitch_eval.utils.console import print_error
from plstitch_eval.utils.outputs import check_output_path

EXTRA_COMPAT_FIELDS = ("precision",)  # besides features.compat_key: bf16 and fp32 features never mix


def _jsonable(obj: Any) -> Any:
    """Dataclasses to dicts, tuples to lists, paths to strings (for the manifest)."""
    if is_dataclass(obj) and not isinstance(obj, type):
        obj = asdict(obj)
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def dataset_splits(adapter: DatasetAdapter) -> tuple[str, dict[str, dict[str, list[str]]]]:
    """(default scheme, {scheme: {split: video names}}) for every official split scheme of `adapter`."""
    schemes = [str(s) for s in adapter.split_schemes]
    return schemes[0], {scheme: dict(adapter.splits(scheme)) for scheme in schemes}


def preprocessing_record(
    data_config: Any, plan: FramePlan, decoding: Decoding = PYAV, frames: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The manifest's `preprocessing`: the model's DataConfig (+ `resize_on_decode` when that mode is on, + a
    clip encoder's window, so stores made with other windows never mix, + the black-margin detection when it
    is on, + a decoder other than PyAV and a CUDA decoding device: `Decoding.record`, absent from stores made
    before, which read as PyAV's; or, for frames read from a frame cache, the cache's `FrameCache.record`:
    JPEG frames never mix with decoded ones)."""
    record = data_config.to_dict() if hasattr(data_config, "to_dict") else _jsonable(data_config)
    if plan.resize_on_decode:
        record["resize_on_decode"] = True
    if plan.clip is not None:
        record["clip"] = plan.clip.to_dict()
    if plan.crop_black_margin:
        record["crop_black_margin"] = detection_record()
    record.update(decoding.record() if frames is None else frames)
    return record


def build_manifest(
    adapter: DatasetAdapter,
    encoder: Any,
    plan: FramePlan,
    precision: str,
    decoding: Decoding = PYAV,
    frames: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Manifest of a store: dataset, splits, classes, model spec + provenance, preprocessing (with the
    decoder, or the frame cache's record), fps, version."""
    default_scheme, schemes = dataset_splits(adapter)
    provenance = _jsonable(dict(getattr(encoder, "provenance", {}) or {}))
    return {
        "dataset": adapter.name,
        "dataset_root": str(getattr(adapter, "root", "") or ""),
        "class_names": list(adapter.class_names),
        "background_classes": list(getattr(adapter, "background_classes", []) or []),
        "tool_names": list(getattr(adapter, "tool_names", []) or []),
        **triplet_names(adapter),
        **cvs_names(adapter),
        **skill_record(adapter),
        "native_fps": getattr(adapter, "native_fps", None),
        "splits": schemes[default_scheme],
        "split_scheme": default_scheme,
        "split_schemes": schemes,
        "model": {
            "spec": provenance.get("spec") or getattr(encoder, "spec", None),
            "feature_dim": int(encoder.feature_dim),
            "provenance": provenance,
        },
        "preprocessing": preprocessing_record(encoder.data_config, plan, decoding, frames),
        "fps": plan.fps,
        "feature_dim": int(encoder.feature_dim),
        "precision": precision,
        "plstitch_version": __version__,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def triplet_names(adapter: DatasetAdapter) -> dict[str, list[str]]:
    """`{"triplet_names": [...]}` for a dataset annotating action triplets (CholecT50/45), else {}: a store of
    any other dataset keeps the manifest it always had."""
    names = list(getattr(adapter, "triplet_names", []) or [])
    return {"triplet_names": names} if names else {}


def cvs_names(adapter: DatasetAdapter) -> dict[str, list[str]]:
    """`{"cvs_names": ["C1", "C2", "C3"]}` for a dataset rating the critical view of safety (Endoscapes),
    else {}: other stores keep the manifest they always had."""
    names = list(getattr(adapter, "cvs_names", []) or [])
    return {"cvs_names": names} if names else {}


def skill_record(adapter: DatasetAdapter) -> dict[str, Any]:
    """`{"skill_names": [...], "skill": {video: {name: score}}}` for a dataset rating each video's skill
    (JIGSAWS, synthetic-skill: `VideoRecord.skill`), else {}: other stores keep the manifest they always had.
    Read by the `skill` task (tasks/skill.py); every video the dataset lists, extracted or not."""
    rated = [record for record in adapter.videos() if record.skill]
    if not rated:
        return {}
    names = [str(n) for n in getattr(adapter, "skill_names", ()) or rated[0].skill]
    scores = {r.name: {n: float(r.skill[n]) for n in names if n in r.skill} for r in rated}
    return {"skill_names": names, "skill": scores}


def check_out_folder(root: Path, overwrite: bool | None = None) -> None:
    """Refuse an `--out` that exists, is not empty and is not a feature store (checked before a model loads,
    again under the store's lock): extraction never deletes (`--overwrite`) or writes into such a folder.

    A store whose manifest was deleted (nothing in it but what a store writes: `features.store_owned`) is
    started again with `overwrite`, refused without it; `overwrite` None (a check before the run's settings
    are at hand) lets it pass for `open_store` to decide. With `overwrite`, a folder holding anything a
    store does not write is refused (`STORE_FILES`), naming the first such entry: nothing of the user's is
    deleted. An `--out` under a regular file is refused too (`check_output_path`)."""
    if root.exists() and not root.is_dir():
        raise FeatureStoreError(f"{root} is a file, not a folder; choose a new or empty --out folder.")
    check_output_path(root, "--out")
    if not root.is_dir():
        return
    # ours: the lock folder, and a manifest another run is writing right now (or that a kill cut short).
    # Listed before the manifest is looked for: a run starting beside this one writes its manifest before
    # any other file, so whatever the listing holds that is not ours is foreign only if no manifest follows.
    foreign = [
        p.name
        for p in root.iterdir()
        if p.name != LOCK_DIR and not (p.name.startswith(f".{MANIFEST}.") and p.name.endswith(".tmp"))
    ]
    if not foreign:
        return
    if (root / MANIFEST).exists():
        if overwrite:
            STORE_FILES.check(root)
        return
    if not all(store_owned(root / name) for name in foreign):
        raise FeatureStoreError(
            f"{root} exists, is not empty and has no {MANIFEST}, so it is not a feature store; "
            "choose a new or empty --out folder."
        )
    if overwrite is False:
        raise FeatureStoreError(
            f"{root} holds feature files but no {MANIFEST} (deleted?), so how they were made is unknown; "
            "pass --overwrite to extract them again, or choose a new or empty --out folder."
        )


def check_stores_folder(root: Path) -> None:
    """Refuse an `--out` for several models' stores that is a file, a feature store itself, or holds files
    (a folder of stores holds only folders, one per model)."""
    if root.exists() and not root.is_dir():
        raise FeatureStoreError(f"{root} is a file, not a folder; choose a new or empty --out folder.")
    check_output_path(root, "--out")
    if not root.is_dir():
        return
    if (root / MANIFEST).exists():
        raise FeatureStoreError(
            f"{root} is the feature store of one model; with several --model, --out is the folder of their "
            "stores: choose a new or empty folder."
        )
    files = sorted(p.name for p in root.iterdir() if not p.is_dir())
    if files:
        raise FeatureStoreError(
            f"{root} holds files ({', '.join(files[:3])}{' ...' if len(files) > 3 else ''}), so it is not a "
            "folder of feature stores; choose a new or empty --out folder."
        )


def open_store(root: Path, manifest: dict[str, Any], overwrite: bool) -> FeatureStore:
    """Create or resume the store at `root` (a resumed store keeps its creation time and its record of the
    videos written); runs starting together into one new folder create it once."""
    check_out_folder(root, overwrite)  # before anything is written into the folder
    root.mkdir(parents=True, exist_ok=True)
    with store_lock(root):
        check_out_folder(root, overwrite)
        return FeatureStore.create(root, manifest, overwrite=overwrite, also_compare=EXTRA_COMPAT_FIELDS)


def plan_videos(
    store: FeatureStore, records: list[VideoRecord], mine: list[int], redo: Sequence[str] = ()
) -> tuple[dict[int, VideoResult], list[VideoJob]]:
    """Skip each of `mine` whose stored file checks out (header, shapes, recorded frame count and sha256)
    unless `redo` names it; every other one becomes a job, a damaged file with a line on stderr. Files the
    manifest has no frame count or sha256 for (a store from an older version) get theirs recorded."""
    manifest = store.manifest
    recorded, checksums = manifest.get(VIDEO_FRAMES) or {}, manifest.get(CHECKSUMS) or {}
    results: dict[int, VideoResult] = {}
    jobs: list[VideoJob] = []
    unrecorded: dict[str, int] = {}
    unsummed: dict[str, str] = {}
    for index in mine:
        record = records[index]
        seen = file_state(store.path(record.name))
        if seen is not None and record.name not in redo:
            problem = store.check(record.name, manifest)
            if problem is None:
                results[index] = VideoResult(record.name, "skipped")
                if record.name not in recorded:
                    unrecorded[record.name] = read_shapes(store.path(record.name))[0]
                if record.name not in checksums:
                    unsummed[record.name] = file_sha256(store.path(record.name))
                continue
            print_error(
                f"{record.name}: stored file unreadable ({problem}), extracting again", "warning", "yellow"
            )
        jobs.append(VideoJob(index, Path(record.source), record.folder_fps, record.name, seen))
    store.record_frames(unrecorded, unsummed)
    return results, jobs
