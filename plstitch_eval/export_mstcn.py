"""Export a feature store in the MS-TCN / ASFormer data layout.

Layout written under `out`::

    features/<video>.npy        float32 (D, T)  - MS-TCN loads np.load(...)[:, ::sample_rate]
    groundTruth/<video>.txt     one class name per line, one line per frame
    mapping.txt                 "<id> <name>" per line, ids = the store's class ids (spaces in names -> _)
    splits/{train,val,test}.splitN.bundle   one "<video>.txt" per line (MS-TCN's bundle convention)

Split scheme i of the store (in manifest order) becomes `splitI`; a scheme named `splitN` keeps its N.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from plstitch_eval.errors import ConfigError, FeatureStoreError
from plstitch_eval.features import MANIFEST, FeatureStore
from plstitch_eval.utils.io import atomic_path, write_text_atomic


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


def export_mstcn(store_path: str | Path, out: str | Path, split_scheme: str | None = None) -> MstcnExport:
    """Write `features/`, `groundTruth/`, `mapping.txt` and `splits/` for MS-TCN from a feature store."""
    store = FeatureStore(store_path)
    manifest = store.manifest
    class_names = store.class_names
    if not class_names:
        raise FeatureStoreError(f"{store.root / MANIFEST} lists no class_names; re-extract the store.")
    class_names = [mstcn_name(name) for name in class_names]
    schemes = store_schemes(manifest)
    if split_scheme is not None:
        if split_scheme not in schemes:
            raise ConfigError(
                f"{store.root / MANIFEST} has no split scheme {split_scheme!r}; recorded: {sorted(schemes)}."
            )
        schemes = {split_scheme: schemes[split_scheme]}

    out = Path(out)
    videos = store.videos()
    if not videos:
        raise FeatureStoreError(f"{store.root} holds no feature files; run `plstitch extract` first.")
    feature_dim = 0
    for video in videos:
        item = store.read(video)
        feature_dim = item.features.shape[1]
        with atomic_path(out / "features" / f"{video}.npy") as tmp, open(tmp, "wb") as handle:
            np.save(handle, np.ascontiguousarray(item.features.T, dtype=np.float32))
        write_text_atomic(
            out / "groundTruth" / f"{video}.txt", ground_truth_lines(item.labels, class_names, video)
        )
    write_text_atomic(out / "mapping.txt", "".join(f"{i} {name}\n" for i, name in enumerate(class_names)))

    present = set(videos)
    bundles = []
    for position, (scheme, splits) in enumerate(schemes.items(), start=1):
        number = split_number(scheme, position)
        for split, names in splits.items():
            kept = [n for n in names if n in present]
            if not kept:
                continue
            name = f"{split}.split{number}.bundle"
            write_text_atomic(out / "splits" / name, "".join(f"{n}.txt\n" for n in kept))
            bundles.append(name)
    return MstcnExport(out=out, videos=len(videos), feature_dim=feature_dim, bundles=bundles)
