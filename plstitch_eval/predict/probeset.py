"""Several probes in one predict run (`--probe` given more than once): `ProbeSet`, their column prefixes, and
their backbones (probes grouped by `backbone_key`).

Why: a phase probe, a tools probe and a remaining-time probe of one backbone ask three questions of the same
features, so one decode and one encoder pass per frame serve them all; probes on different backbones run side
by side in the same decode (one encoder pass per backbone per frame), which needs them to sample one frame
rate. Each output names the probe a column came from with the probe's prefix (`<prefix>.<column>`). One
probe keeps today's columns, unprefixed.
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
    """The run's probes in command-line order, each with its column prefix and the position of its backbone
    (`backbone_of`, numbered in order of first appearance; empty: all on one)."""

    probes: tuple[Probe, ...]
    prefixes: tuple[str, ...]
    backbone_of: tuple[int, ...] = ()

    @classmethod
    def of(cls, probes: Sequence[Probe]) -> ProbeSet:
        """The set of `probes` grouped by backbone; refused in one line when their frame rates differ."""
        check_one_decode(probes)
        keys: list[dict[str, Any]] = []
        for probe in probes:
            if backbone_key(probe) not in keys:
                keys.append(backbone_key(probe))
        groups = tuple(keys.index(backbone_key(p)) for p in probes)
        return cls(tuple(probes), tuple(probe_prefixes(probes)), groups if len(keys) > 1 else ())

    @property
    def backbones(self) -> int:
        """How many backbones the probes are on (one encoder pass each per frame)."""
        return max(self.backbone_of, default=0) + 1

    def group(self, index: int) -> int:
        """The backbone position of the probe at `index`."""
        return self.backbone_of[index] if self.backbone_of else 0

    @property
    def leads(self) -> list[Probe]:
        """Each backbone's first probe, in backbone order: its encoder is loaded and checked for all."""
        return [
            next(p for i, p in enumerate(self.probes) if self.group(i) == g) for g in range(self.backbones)
        ]

    @property
    def single(self) -> bool:
        return len(self.probes) == 1

    @property
    def first(self) -> Probe:
        """The probe whose fps the run samples at and whose encoder is the first backbone's."""
        return self.probes[0]

    @property
    def phase_probe(self) -> tuple[str, Probe] | None:
        """The first probe that gives one class per frame (the page's phase and ribbon), with its prefix;
        None: none (regression and multi-label probes never are)."""
        return next(((x, p) for x, p in self.named() if p.gives_classes), None)

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


def check_one_decode(probes: Sequence[Probe]) -> None:
    """Refuse (one line naming both probes and the fix) probes that sample different frame rates: the run
    decodes each video once for all of them."""
    if not probes:
        raise ConfigError("give at least one --probe DIR.")
    first = probes[0]
    for probe in probes[1:]:
        if probe.fps != first.fps:
            raise ConfigError(
                f"--probe {first.name} and --probe {probe.name} sample different frame rates ({first.fps:g} "
                f"vs {probe.fps:g} fps); probes of one run share one decode: run one plstitch predict per "
                "frame rate."
            )
