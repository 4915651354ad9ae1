"""The models of a benchmark: the paper's collections, checking a `--models` spec, and each model's folder
name under --out."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from plstitch_eval.benchmark.inputs import split_items
from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.registry import MODELS
from plstitch_eval.hub.safe_load import CHECKPOINT_SUFFIXES  # noqa: F401  (the old module's name, kept)
from plstitch_eval.hub.spec import check_spec
from plstitch_eval.utils.console import logger


@dataclass(frozen=True)
class Collection:
    """A named list of models for `--models`: the methods of one paper table that plstitch can load."""

    name: str
    description: str
    models: tuple[str, ...]  # registry names (entries missing from the registry are left out)
    datasets: tuple[str, ...]  # the adapters the paper evaluates them on
    missing: tuple[str, ...]  # the paper's methods of this table with no loadable checkpoint in plstitch

    def available(self) -> list[str]:
        """The collection's models that the registry holds."""
        return [name for name in self.models if name in MODELS]


COLLECTIONS: dict[str, Collection] = {
    c.name: c
    for c in (
        Collection(
            "paper-surgical",
            "PL-Stitch paper, Table 1 (surgical phase recognition)",
            (
                "pl-stitch-lemon",
                "lemonfm",
                "endovit",
                "dino-vitb16",
                "mae-vitb16",
                "ibot-vitb16",
                "endo-fm",
                "videomaev2-vitb16",
                "t-core-vitb16",
            ),
            ("autolaparo", "cholec80", "m2cai16"),
            (),
        ),
        Collection(
            "paper-cooking",
            "PL-Stitch paper, Table 2 (cooking action segmentation)",
            (
                "pl-stitch-gtea",
                "pl-stitch-breakfast",
                "dino-vitb16",
                "ibot-vitb16",
                "videomaev2-vitb16",
                "t-core-vitb16",
            ),
            ("gtea", "breakfast"),
            (),
        ),
        Collection(
            "2026",
            "Baselines of 2026 beside PL-Stitch: DINOv3, SurgeNetDINO, V-JEPA 2, VideoMAE V2-L",
            (
                "pl-stitch-lemon",
                "dinov3-vitb16",
                "dinov3-vitl16",
                "surgenet-dinov1-vitb16",
                "surgenet-dinov2-vitb14",
                "surgenet-dinov3-vitb16",
                "vjepa2-vitl16",
                "videomaev2-vitl16",
            ),
            ("autolaparo", "cholec80", "m2cai16"),
            (),
        ),
    )
}


def check_model_spec(spec: str) -> str:
    """`spec` stripped when `load_encoder` could take it; a bare name that is nothing known is a ConfigError.

    The grammar is `hub.spec`'s; paths are not opened here: a missing checkpoint fails its own cells at run
    time, not the whole run.
    """
    return check_spec(spec, option="--models", collections=tuple(COLLECTIONS))


def expand_models(models: str | Sequence[str]) -> list[str]:
    """Specs of `--models` (comma list or sequence): collections expanded, each checked, no duplicates."""
    items = split_items(models, "--models")
    out: list[str] = []
    for item in items:
        if item in COLLECTIONS:
            collection = COLLECTIONS[item]
            members = collection.available()
            if not members:
                raise ConfigError(f"Collection {item!r} has no model in this registry; list models instead.")
            if collection.missing:
                logger.info(
                    "%s: the paper's %s have no loadable checkpoint in plstitch and are left out.",
                    item,
                    ", ".join(collection.missing),
                )
            out.extend(members)
        else:
            out.append(check_model_spec(item))
    return list(dict.fromkeys(out))


def model_dirs(models: Sequence[str]) -> dict[str, str]:
    """A distinct folder name per spec: the spec with unsafe characters as `_` (+ a digest on clashes)."""

    def slug(spec: str) -> str:
        text = re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("._") or "model"
        return text if len(text) <= 80 else f"{text[:70]}-{sha256_text(spec)[:8]}"

    slugs = {spec: slug(spec) for spec in models}
    counts: dict[str, int] = {}
    for value in slugs.values():
        counts[value] = counts.get(value, 0) + 1
    return {spec: s if counts[s] == 1 else f"{s}-{sha256_text(spec)[:8]}" for spec, s in slugs.items()}


def sha256_text(text: str) -> str:
    """Hex SHA-256 of `text` (folder-name suffixes here, store digests in cells.py)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
