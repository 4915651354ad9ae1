"""`check_probe_matches` (`probes.matching`): matching features pass, others are refused naming both sides."""

from __future__ import annotations

import json

import pytest

from plstitch_eval.probes import ProbeError, check_probe_matches, load_probe
from tests.eval.probes.conftest import PREPROCESSING, one_line_error, save_random


def test_matching_encoder_passes_and_unknown_fields_are_not_compared(tmp_path):
    probe = load_probe(save_random(tmp_path / "probe"))
    check_probe_matches(probe, "hf-hub:org/encoder-a", "ab" * 32, json.loads(json.dumps(PREPROCESSING)))
    check_probe_matches(probe, "hf-hub:org/encoder-a", None, {**PREPROCESSING, "input_size": (3, 224, 224)})
    check_probe_matches(probe, None, None, None)


@pytest.mark.parametrize(
    ("spec", "sha", "preprocessing", "expected"),
    [
        ("hf-hub:org/encoder-b", "ab" * 32, PREPROCESSING, "pass --model hf-hub:org/encoder-a"),
        ("hf-hub:org/encoder-a", "cd" * 32, PREPROCESSING, "sha256 cdcdcdcdcdcd…"),
        ("hf-hub:org/encoder-a", "ab" * 32, {**PREPROCESSING, "crop_pct": 0.875}, '{"crop_pct": 0.875}'),
    ],
    ids=["spec", "sha256", "preprocessing"],
)
def test_mismatched_encoder_is_refused_naming_both(tmp_path, spec, sha, preprocessing, expected):
    folder = save_random(tmp_path / "probe")
    with pytest.raises(ProbeError) as exc:
        check_probe_matches(load_probe(folder), spec, sha, preprocessing)
    message = one_line_error(exc)
    assert (
        f"probe {folder} was trained on features of model hf-hub:org/encoder-a (sha256 abababababab…"
        in message
    )
    assert f"the given model is {spec} (" in message and expected in message
    if preprocessing != PREPROCESSING:
        assert '{"crop_pct": 1.0}' in message and "mean" not in message  # only the differing keys
