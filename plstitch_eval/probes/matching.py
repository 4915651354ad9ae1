"""Whether features fit a probe: the encoder spec, the weights' sha256 and the preprocessing record must be
the ones the probe was trained on (docs/probes.md lists the rules)."""

from __future__ import annotations

import json
from typing import Any

from plstitch_eval.probes.probe import Probe, ProbeError, json_round_trip
from plstitch_eval.utils.io import json_default


def check_probe_matches(
    probe: Probe, encoder_spec: str | None, weights_sha256: str | None, preprocessing: dict | None
) -> None:
    """Refuse (`ProbeError`, one line naming both sides) features made another way than the probe's.

    Rules: the encoder specs must be equal when both are known; the weights' sha256 must be equal when both
    are recorded; the preprocessing records must be equal (after a JSON round trip) when both are known.
    """
    want_spec, want_sha = probe.encoder.get("spec"), probe.encoder.get("weights_sha256")
    spec_differs = want_spec is not None and encoder_spec is not None and want_spec != encoder_spec
    sha_differs = want_sha is not None and weights_sha256 is not None and want_sha != weights_sha256
    want_pre, got_pre = json_round_trip(probe.preprocessing), json_round_trip(preprocessing)
    pre_differs = want_pre is not None and got_pre is not None and want_pre != got_pre
    if not (spec_differs or sha_differs or pre_differs):
        return
    keys = _differing_keys(want_pre, got_pre) if pre_differs else []
    ours = _describe(want_spec, want_sha, want_pre, keys)
    theirs = _describe(encoder_spec, weights_sha256, got_pre, keys)
    where = probe.folder or f"{probe.kind} probe"
    fix = (
        f"pass --model {want_spec} or train a probe on {encoder_spec}'s features"
        if spec_differs or sha_differs
        else f"extract features with the probe's preprocessing, or train a probe on {encoder_spec}'s features"
    )
    raise ProbeError(
        f"probe {where} was trained on features of model {ours}; the given model is {theirs}; {fix}."
    )


def _describe(spec: str | None, sha: str | None, preprocessing: Any, keys: list[str]) -> str:
    details = [f"sha256 {sha[:12]}…" if sha else "sha256 not recorded"]
    if keys:
        whole = keys == ["*"] or not isinstance(preprocessing, dict)
        shown = preprocessing if whole else {k: preprocessing.get(k) for k in keys}
        details.append(f"preprocessing {json.dumps(shown, sort_keys=True, default=json_default)}")
    return f"{spec} ({', '.join(details)})"


def _differing_keys(a: Any, b: Any) -> list[str]:
    """Keys of two preprocessing dicts whose values differ (all of them when either is no dict)."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return ["*"]
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
