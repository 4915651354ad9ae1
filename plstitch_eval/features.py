"""Feature store: one safetensors file per video plus `manifest.json`, written atomically.

Layout of a store folder::

    manifest.json            dataset, splits, class names, model spec + provenance, preprocessing, fps, ...
    <video>.safetensors      features [T, D] float32, labels [T] int64, frame_times [T] float64 (seconds)

Labels are -1 (unlabelled) or an index into the manifest's `class_names`; evaluation refuses any other value.

A store is tied to one (model, preprocessing, fps, dataset) combination - its *compatibility key*; writing
features made another way into an existing store is refused unless the caller overwrites it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file, save_file

from plstitch_eval.errors import FeatureStoreError
from plstitch_eval.utils.io import atomic_path, write_json_atomic

MANIFEST = "manifest.json"
FORMAT_VERSION = 1
COMPAT_FIELDS = ("dataset", "model_spec", "weights_sha256", "preprocessing", "fps")


@dataclass
class VideoFeatures:
    """Per-frame features of one video with their labels and presentation times."""

    video: str
    features: np.ndarray  # [T, D] float32
    labels: np.ndarray  # [T] int64 class ids (-1 = unlabelled)
    frame_times: np.ndarray  # [T] float64 seconds

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


class FeatureStore:
    """A folder of per-video feature files with a manifest describing how they were made."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @classmethod
    def create(cls, root: str | Path, manifest: dict[str, Any], overwrite: bool = False) -> FeatureStore:
        """Open `root` for writing with `manifest`; refuse to mix with an incompatible existing store."""
        store = cls(root)
        manifest_path = store.root / MANIFEST
        if manifest_path.exists():
            old = store.manifest
            if compat_key(old) != compat_key(manifest):
                if not overwrite:
                    diff = {
                        k: (v, compat_key(manifest)[k])
                        for k, v in compat_key(old).items()
                        if v != compat_key(manifest)[k]
                    }
                    raise FeatureStoreError(
                        f"{store.root} already holds features made differently ({diff}, as old -> new). "
                        "Use another --out folder, or --overwrite to delete the old features."
                    )
                shutil.rmtree(store.root)
        store.root.mkdir(parents=True, exist_ok=True)
        store.write_manifest(manifest)
        return store

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
        """Whether `video` was written completely (atomic writes make existence enough)."""
        return self.path(video).exists()

    def videos(self) -> list[str]:
        """Names of all videos with a feature file, sorted."""
        return sorted(
            str(p.relative_to(self.root).with_suffix(""))
            for p in self.root.rglob("*.safetensors")
            if not p.name.startswith(".")
        )

    def write(self, item: VideoFeatures) -> None:
        """Write one video's features atomically (temp file, then rename)."""
        tensors = {
            "features": np.ascontiguousarray(item.features, dtype=np.float32),
            "labels": np.ascontiguousarray(item.labels, dtype=np.int64),
            "frame_times": np.ascontiguousarray(item.frame_times, dtype=np.float64),
        }
        with atomic_path(self.path(item.video)) as tmp:
            save_file(tensors, str(tmp), metadata={"video": item.video})

    def read(self, video: str) -> VideoFeatures:
        """Read one video's features; a missing video names the store and the fix."""
        path = self.path(video)
        if not path.exists():
            raise FeatureStoreError(f"{path} not found: video {video!r} has no features in {self.root}.")
        try:
            tensors = load_file(str(path))
        except Exception as exc:  # safetensors raises its own error types
            raise FeatureStoreError(
                f"{path} is not a readable safetensors file ({exc}); re-extract it."
            ) from exc
        missing = {"features", "labels", "frame_times"} - set(tensors)
        if missing:
            raise FeatureStoreError(f"{path} lacks tensors {sorted(missing)}; re-extract this video.")
        return VideoFeatures(video, tensors["features"], tensors["labels"], tensors["frame_times"])

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
