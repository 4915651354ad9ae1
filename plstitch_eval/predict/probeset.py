"""Several probes in one predict run (`--probe` given more than once): `ProbeSet`, their column prefixes, and
the refusal of probes on different backbones.

Why: a phase probe, a tools probe and a remaining-time probe of one backbone ask three questions of the same
features, so one decode and one encoder pass per frame serve them all; each output names the probe a column
came from with the probe's prefix (`<prefix>.<column>`). One probe keeps today's columns, unprefixed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plstitch_eval.data.decoders import DECODER_FIELDS
from plstitch_eval.errors import ConfigError
from plstitch_eval.probes import Probe
from plstitch_eval.probes.probe import json_round_trip

SEPARATOR = "."  # between a probe's prefix and its column: `phases.predicted`, `rsd.remaining_min`


@dataclass(frozen=True)
class ProbeSet:
    """The run's probes in command-line order, all on one backbone, each with its column prefix."""

    probes: tuple[Probe, ...]
    prefixes: tuple[str, ...]

    @classmethod
    def of(cls, probes: Sequence[Probe]) -> ProbeSet:
        """The set of `probes`, refused in one line when they are not all on one backbone."""
        check_one_backbone(probes)
        return cls(tuple(probes), tuple(probe_prefixes(probes)))

    @property
    def single(self) -> bool:
        return len(self.probes) == 1

    @property
    def first(self) -> Probe:
        """The probe whose encoder, fps and preprocessing the run uses (all probes share them)."""
        return self.probes[0]

    @property
    def phase_probe(self) -> tuple[str, Probe] | None:
        """The first probe that gives classes (the page's phase and ribbon), with its prefix; None: none."""
        return next(((x, p) for x, p in self.named() if not p.is_regression), None)

    @property
    def label_classes(self) -> list[str]:
        """The class names a case's labels are read with: the first phase probe's, else the first probe's."""
        found = self.phase_probe
        return (found[1] if found else self.first).label_classes

    def named(self) -> list[tuple[str, Probe]]:
        return list(zip(self.prefixes, self.probes, strict=True))

    def column(self, prefix: str, name: str) -> str:
        """A probe's column as the outputs name it: unprefixed with one probe, else `<prefix>.<name>`."""
        return name if self.single else f"{prefix}{SEPARATOR}{name}"


def as_probe_set(probe: Probe | ProbeSet) -> ProbeSet:
    """A lone probe as a set of one (its outputs unprefixed)."""
    return probe if isinstance(probe, ProbeSet) else ProbeSet((probe,), (probe_prefix(probe),))


def probe_prefix(probe: Probe) -> str:
    """A probe's column prefix: its folder's name (a published probe's repo name), file-name safe."""
    if probe.source.get("hub"):
        base = str(probe.source["hub"]).split("@", 1)[0].rstrip("/").rsplit("/", 1)[-1]
    else:
        base = Path(str(probe.folder)).name if probe.folder is not None else probe.task_name
    return re.sub(r"[^A-Za-z0-9_-]+", "-", base).strip("-") or probe.task_name


def probe_prefixes(probes: Sequence[Probe]) -> list[str]:
    """Each probe's prefix; two probes of one name get their task, then their place, after it."""
    bases = [probe_prefix(p) for p in probes]
    names = [f"{b}-{p.task_name}" if bases.count(b) > 1 else b for b, p in zip(bases, probes, strict=True)]
    return [name if names.count(name) == 1 else f"{name}-{i + 1}" for i, name in enumerate(names)]


def backbone_key(probe: Probe) -> dict[str, Any]:
    """What two probes must share to share an encoder pass: encoder spec, weights sha256, feature size, fps
    and preprocessing (the decoder aside: decoders give the same frames)."""
    pre = probe.preprocessing if isinstance(probe.preprocessing, dict) else {}
    return {
        "encoder": probe.encoder.get("spec"),
        "sha256": probe.encoder.get("weights_sha256"),
        "feature_dim": probe.encoder.get("feature_dim"),
        "fps": probe.fps,
        "preprocessing": json_round_trip({k: v for k, v in pre.items() if k not in DECODER_FIELDS}),
    }


def check_one_backbone(probes: Sequence[Probe]) -> None:
    """Refuse (one line naming both probes, what differs and the fix) probes on different backbones."""
    if not probes:
        raise ConfigError("give at least one --probe DIR.")
    first = backbone_key(probes[0])
    for probe in probes[1:]:
        other = backbone_key(probe)
        differs = [key for key in first if first[key] != other[key]]
        if not differs:
            continue
        key = differs[0]
        what = (
            "preprocessing" if key == "preprocessing" else f"{key} {first[key]!s:.16} vs {other[key]!s:.16}"
        )
        raise ConfigError(
            f"--probe {probes[0].name} and --probe {probe.name} are on different backbones ({what}); "
            "probes of one run share one encoder pass: run one plstitch predict per backbone."
        )
