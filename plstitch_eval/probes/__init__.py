"""Saved probes: a head trained on frozen features, in a folder that names the features it expects.

`probe`: the loaded `Probe`, `ProbeError` and the folder's file names; `kinds`: the registry of probe kinds
and the heads shipped (``linear``, ``temporal``); `folder`: saving and loading a probe folder (sha256-checked,
strict); `matching`: `check_probe_matches`, the refusal of features made another way. Published probes
(imported from their modules, which pull in `huggingface_hub`'s cards): `publish` (the Hub repo folder and its
upload), `hub` (`resolve_probe` of a folder or ``hf-hub:ORG/NAME``, `download_probe`, `cached_probes`),
`backbone` (the pin and its check), `card`, `licences`. docs/probes.md.
"""

from plstitch_eval.probes.folder import check_probe_target, load_probe, save_linear_probe, save_probe
from plstitch_eval.probes.kinds import (
    Builder,
    LinearProbeHead,
    TemporalProbeHead,
    Wrapper,
    probe_kinds,
    register_probe_kind,
)
from plstitch_eval.probes.matching import check_probe_matches
from plstitch_eval.probes.probe import PROBE_JSON, PROBE_SCHEMA, PROBE_WEIGHTS, RESAVE_FIX, Probe, ProbeError

__all__ = [
    "PROBE_JSON",
    "PROBE_SCHEMA",
    "PROBE_WEIGHTS",
    "RESAVE_FIX",
    "Builder",
    "LinearProbeHead",
    "Probe",
    "ProbeError",
    "TemporalProbeHead",
    "Wrapper",
    "check_probe_matches",
    "check_probe_target",
    "load_probe",
    "probe_kinds",
    "register_probe_kind",
    "save_linear_probe",
    "save_probe",
]
