"""A loaded probe (`Probe`), the error every probe check raises, and the names of a probe folder's files.

A probe folder holds two files and nothing else (no pickle)::

    probe.json          schema, kind, class names, encoder {spec, weights_sha256, feature_dim}, preprocessing,
                        fps, causal, settings, metrics, dataset, source, created, plstitch_version, weights
    probe.safetensors   the head's state dict (its sha256 is recorded in probe.json and checked at load)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from plstitch_eval.errors import PlstitchError
from plstitch_eval.utils.io import json_default

PROBE_JSON = "probe.json"
PROBE_WEIGHTS = "probe.safetensors"
PROBE_SCHEMA = "plstitch.probe/v1"
RESAVE_FIX = "train and save the probe again (--save DIR --overwrite)"


class ProbeError(PlstitchError, ValueError):
    """A probe folder is missing, malformed or tampered with, or does not fit the features it is given."""


@dataclass
class Probe:
    """A loaded probe: the head (eval mode, CPU) and everything recorded about the features it expects."""

    kind: str
    head: nn.Module
    class_names: list[str]
    encoder: dict
    preprocessing: dict
    fps: float
    causal: bool
    settings: dict
    metrics: dict
    dataset: str | None
    source: dict
    folder: Path | None = field(default=None)

    @property
    def name(self) -> str:
        """How a user names this probe: ``hf-hub:ORG/NAME@COMMIT`` for a published one, else its folder."""
        return str(self.source.get("hub") or self.folder or self.kind)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def logits(self, features: np.ndarray) -> np.ndarray:
        """Logits [T, C] (float32) of one video's features [T, D]."""
        x = np.asarray(features, dtype=np.float32)
        dim = self.encoder.get("feature_dim")
        if x.ndim != 2 or (dim is not None and x.shape[1] != dim):
            raise ProbeError(
                f"probe {self.folder or self.kind} expects features [frames, {dim}], got shape "
                f"{list(x.shape)}; extract features with the probe's encoder {self.encoder.get('spec')}."
            )
        if len(x) == 0:
            return np.zeros((0, self.num_classes), np.float32)
        with torch.no_grad():
            return self.head(torch.from_numpy(np.ascontiguousarray(x))).cpu().numpy()

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Softmax of the logits over classes, [T, C]."""
        z = self.logits(features).astype(np.float64)
        if len(z):
            z = np.exp(z - z.max(axis=-1, keepdims=True))
            z /= z.sum(axis=-1, keepdims=True)
        return z.astype(np.float32)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Class ids [T] (ties go to the lowest class id, as the linear protocol scores)."""
        return self.logits(features).argmax(-1)


def json_round_trip(value: Any) -> Any:
    """`value` as it reads back from JSON (tuples -> lists, numpy scalars -> numbers, paths -> strings)."""
    return json.loads(json.dumps(value, default=json_default))
