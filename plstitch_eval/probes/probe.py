"""A loaded probe (`Probe`), the error every probe check raises, and the names of a probe folder's files.

A probe folder holds two files and nothing else (no pickle)::

    probe.json          schema, kind, class names, encoder {spec, weights_sha256, feature_dim}, preprocessing,
                        fps, causal, settings, metrics, dataset, source, created, plstitch_version, weights;
                        a regression task's probe also ``task`` (name, head, outputs, columns, its settings);
                        a multi-label task's (tools, triplets, cvs) ``task`` with head ``multi-label``, its
                        columns and a decision threshold per label
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
MULTILABEL_HEAD = "multi-label"  # the task block's head of a tools / triplets / cvs probe
PRESENT_FIELD = "present"  # a multi-label probe's field: the labels above threshold, `;`-joined
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
    task: dict | None = field(default=None)  # a regression / multi-label task's block; None: phases

    @property
    def task_name(self) -> str:
        return str((self.task or {}).get("name", "phases"))

    @property
    def is_regression(self) -> bool:
        """Whether the probe gives minutes (anticipation, remaining duration) rather than classes."""
        return bool(self.task) and self.task.get("head") == "regression"

    @property
    def is_multilabel(self) -> bool:
        """Whether the probe says which labels are present (tools, triplets, CVS criteria): one sigmoid per
        label, each against its own threshold, rather than one class per frame."""
        return bool(self.task) and self.task.get("head") == MULTILABEL_HEAD

    @property
    def gives_classes(self) -> bool:
        """Whether the probe picks one class per frame (a phase probe): neither minutes nor labels present."""
        return not (self.is_regression or self.is_multilabel)

    @property
    def label_classes(self) -> list[str]:
        """The phase names a case's labels use (`--labels`, `--dataset`): the probe's classes, or the phases
        of a regression or multi-label probe's training store."""
        if not self.gives_classes:
            return [str(c) for c in (self.task or {}).get("label_classes", [])]
        return list(self.class_names)

    @property
    def value_columns(self) -> list[str]:
        """A regression probe's output columns (e.g. ``remaining_min``, ``next_<class>_min``); a multi-label
        probe's probability column per label (``tool_<name>``, ``triplet_<name>``, ``cvs_<name>``)."""
        return [str(c) for c in (self.task or {}).get("columns", [])]

    @property
    def thresholds(self) -> np.ndarray:
        """A multi-label probe's decision threshold per label: present when its probability is above it."""
        return np.asarray((self.task or {}).get("thresholds", []), dtype=np.float64)

    @property
    def live_columns(self) -> list[str]:
        """The fields the live page shows beside the phase: a regression probe's minutes, a multi-label
        probe's probability columns and ``present``; none for a phase probe."""
        if self.is_multilabel:
            return [*self.value_columns, PRESENT_FIELD]
        return self.value_columns if self.is_regression else []

    def present(self, probabilities: np.ndarray) -> list[str]:
        """The labels of one frame's probabilities [K] above their thresholds, in label order."""
        above = np.asarray(probabilities, np.float64) > self.thresholds
        return [name for name, on in zip(self.class_names, above, strict=True) if on]

    @property
    def name(self) -> str:
        """How a user names this probe: ``hf-hub:ORG/NAME@COMMIT`` for a published one, else its folder."""
        return str(self.source.get("hub") or self.folder or self.kind)

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def logits(self, features: np.ndarray) -> np.ndarray:
        """Logits [T, C] (float32) of one video's features [T, D]."""
        self._require_classes()
        return self._head_outputs(self._checked(features))

    def values(self, features: np.ndarray, frame_times: np.ndarray) -> np.ndarray:
        """A regression probe's outputs [T, K] in minutes (float64), within its task's bounds; `frame_times`
        (seconds) give the elapsed-minutes input of a probe trained with ``--elapsed``. A multi-label
        probe's: each label's presence probability [T, K] (`probabilities`, float64)."""
        if self.is_multilabel:
            return self.probabilities(features).astype(np.float64)
        if not self.is_regression:
            raise ProbeError(
                f"probe {self.name} recognises classes ({', '.join(self.class_names[:4])}, ...); it gives "
                "no minutes: use a probe saved with --task anticipation or rsd."
            )
        x = self._checked(features)
        if (self.task or {}).get("elapsed"):
            minutes = np.asarray(frame_times, np.float64).reshape(-1) / 60.0
            if len(minutes) != len(x):
                raise ProbeError(f"probe {self.name}: {len(x)} frames but {len(minutes)} frame times.")
            x = np.concatenate([x, minutes.astype(np.float32)[:, None]], axis=1)
        return self._head_outputs(x).astype(np.float64)

    def _require_classes(self) -> None:
        if self.is_regression:
            raise ProbeError(
                f"probe {self.name} is a regression probe (task {self.task_name}): it predicts minutes, not "
                "classes; use a phase probe here, or plstitch predict for its minutes."
            )

    def _head_outputs(self, x: np.ndarray) -> np.ndarray:
        if len(x) == 0:
            return np.zeros((0, self.num_classes), np.float32)
        with torch.no_grad():
            return self.head(torch.from_numpy(np.ascontiguousarray(x))).cpu().numpy()

    def _checked(self, features: np.ndarray) -> np.ndarray:
        x = np.asarray(features, dtype=np.float32)
        dim = self.encoder.get("feature_dim")
        if x.ndim != 2 or (dim is not None and x.shape[1] != dim):
            raise ProbeError(
                f"probe {self.folder or self.kind} expects features [frames, {dim}], got shape "
                f"{list(x.shape)}; extract features with the probe's encoder {self.encoder.get('spec')}."
            )
        return x

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """Softmax of the logits over classes, [T, C]; a multi-label probe's sigmoid of each logit."""
        z = self.logits(features).astype(np.float64)
        if self.is_multilabel:
            return (0.5 * (1.0 + np.tanh(0.5 * z))).astype(np.float32)  # stable sigmoid
        if len(z):
            z = np.exp(z - z.max(axis=-1, keepdims=True))
            z /= z.sum(axis=-1, keepdims=True)
        return z.astype(np.float32)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Class ids [T] (ties go to the lowest class id, as the linear protocol scores)."""
        if self.is_multilabel:
            raise ProbeError(
                f"probe {self.name} says which {self.task_name} are present (several per frame), not one "
                "class per frame; read its probabilities, or use a phase probe here."
            )
        return self.logits(features).argmax(-1)


def json_round_trip(value: Any) -> Any:
    """`value` as it reads back from JSON (tuples -> lists, numpy scalars -> numbers, paths -> strings)."""
    return json.loads(json.dumps(value, default=json_default))
