"""Saved probes: a head trained on frozen features, in a folder that names the features it expects.

A probe folder holds two files and nothing else (no pickle)::

    probe.json          schema, kind, class names, encoder {spec, weights_sha256, feature_dim}, preprocessing,
                        fps, causal, settings, metrics, dataset, source, created, plstitch_version, weights
    probe.safetensors   the head's state dict (its sha256 is recorded in probe.json and checked at load)

A *kind* names a builder in a registry (`register_probe_kind`): ``builder(settings, feature_dim,
num_classes)`` returns an empty head that the weights fill strictly. Kinds shipped: ``linear``
(`LinearProbeHead`, the chosen head of a linear-probe grid) and ``temporal`` (`TemporalProbeHead` around an
MS-TCN). Every head maps one video's features ``[T, D]`` to logits ``[T, C]``. The format and the mismatch
rules are documented in docs/probes.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from plstitch_eval import __version__
from plstitch_eval.errors import PlstitchError
from plstitch_eval.features import FeatureStore
from plstitch_eval.hub.convert import state_dict_mismatch
from plstitch_eval.hub.safe_load import load_safetensors_file, sha256_file
from plstitch_eval.linear import LinearProbeResult
from plstitch_eval.utils.io import json_default, temp_dir_beside, write_json_atomic

PROBE_JSON = "probe.json"
PROBE_WEIGHTS = "probe.safetensors"
PROBE_SCHEMA = "plstitch.probe/v1"
RESAVE_FIX = "train and save the probe again (--save DIR --overwrite)"


class ProbeError(PlstitchError, ValueError):
    """A probe folder is missing, malformed or tampered with, or does not fit the features it is given."""


Builder = Callable[[dict, int, int], nn.Module]
Wrapper = Callable[[nn.Module], nn.Module]


@dataclass(frozen=True)
class _Kind:
    builder: Builder
    wrap: Wrapper | None = None


_KINDS: dict[str, _Kind] = {}


def register_probe_kind(kind: str, builder: Builder, wrap: Wrapper | None = None) -> None:
    """Register `builder(settings, feature_dim, num_classes) -> head` under `kind` (the dispatch of load).

    Why: a new head type adds a builder, not a branch in `save_probe` / `load_probe`. `wrap`, if given, turns
    a bare model handed to `save_probe` into the head (e.g. an MS-TCN into a `TemporalProbeHead`).
    Re-registering a kind with the same builder is a no-op; another builder is refused.
    """
    known = _KINDS.get(kind)
    if known is not None and (known.builder is not builder or known.wrap is not wrap):
        raise ProbeError(
            f"probe kind {kind!r} is already registered with another builder; pick another name."
        )
    _KINDS[kind] = _Kind(builder, wrap)


def probe_kinds() -> list[str]:
    """Names of the registered probe kinds."""
    return sorted(_KINDS)


def _kind(kind: str, where: str) -> _Kind:
    if kind not in _KINDS:
        raise ProbeError(
            f"{where}: probe kind {kind!r} is unknown; known kinds: {', '.join(probe_kinds())} "
            "(a newer plstitch may know it)."
        )
    return _KINDS[kind]


# ------------------------------------------------------------------------------------------------- heads
class LinearProbeHead(nn.Module):
    """The chosen head of a linear-probe grid: ``logits = ((x - mean) / std) @ weight + bias``.

    Same arithmetic, in the same order, as `LinearGrid.logits(head=...)`, so the logits are equal.
    """

    causal = True  # frame t's logits depend on frame t only

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", mean.detach().float().cpu().clone())
        self.register_buffer("std", std.detach().float().cpu().clone())
        self.weight = nn.Parameter(weight.detach().float().cpu().clone(), requires_grad=False)
        self.bias = nn.Parameter(bias.detach().float().cpu().clone(), requires_grad=False)

    @classmethod
    def empty(cls, feature_dim: int, num_classes: int) -> LinearProbeHead:
        """A zero head of the right shapes, to be filled by a strict state-dict load."""
        d, c = int(feature_dim), int(num_classes)
        return cls(torch.zeros(d), torch.ones(d), torch.zeros(d, c), torch.zeros(c))

    @classmethod
    def from_result(cls, result: LinearProbeResult) -> LinearProbeHead:
        """The head `result` chose (`best_head`) out of its grid, with the grid's standardisation."""
        grid, best = result.grid, result.best_head
        return cls(grid.mean, grid.std, grid.weight[:, best], grid.bias[best])

    @property
    def feature_dim(self) -> int:
        return int(self.weight.shape[0])

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return ((features - self.mean) / self.std) @ self.weight + self.bias


class TemporalProbeHead(nn.Module):
    """One video's features ``[T, D]`` -> the last stage's logits ``[T, C]`` of a multi-stage TCN.

    The wrapped model takes ``[B, D, T]`` (and a mask, None here) and returns stage logits ``[S, B, C, T]``.
    """

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    @property
    def causal(self) -> bool | None:
        value = getattr(self.model, "causal", None)
        return None if value is None else bool(value)

    @property
    def feature_dim(self) -> int | None:
        value = getattr(self.model, "in_dim", None)
        if value is not None:
            return int(value)
        conv = next((m for m in self.model.modules() if isinstance(m, nn.Conv1d)), None)
        return None if conv is None else int(conv.in_channels)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        stages = self.model(features.T[None], None)
        return stages[-1][0].T


def _build_linear(settings: dict, feature_dim: int, num_classes: int) -> nn.Module:
    return LinearProbeHead.empty(feature_dim, num_classes)


def _build_temporal(settings: dict, feature_dim: int, num_classes: int) -> nn.Module:
    # Imported here: the temporal package imports this module to save its probes (a real cycle).
    from plstitch_eval.temporal.mstcn import MultiStageTCN

    keys = ("stages", "layers", "channels", "dropout", "causal")
    missing = [k for k in keys if k not in settings]
    if missing:
        raise ProbeError(f"temporal probe settings lack {', '.join(missing)}; pass asdict(TemporalConfig).")
    model = MultiStageTCN(feature_dim, num_classes, **{k: settings[k] for k in keys})
    return TemporalProbeHead(model)


def _wrap_temporal(head: nn.Module) -> nn.Module:
    return head if isinstance(head, TemporalProbeHead) else TemporalProbeHead(head)


register_probe_kind("linear", _build_linear)
register_probe_kind("temporal", _build_temporal, wrap=_wrap_temporal)


# ------------------------------------------------------------------------------------------------- probe
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


# -------------------------------------------------------------------------------------------------- save
def check_probe_target(folder: str | os.PathLike, overwrite: bool = False) -> Path:
    """Refuse (`ProbeError`) a target that is a file, or a non-empty folder unless `overwrite`.

    Why: called before training, so a long run is not thrown away at the end; `save_probe` checks again.
    """
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ProbeError(f"{folder} exists and is not a folder; choose another probe folder.")
    if folder.is_dir() and any(folder.iterdir()):
        if not overwrite:
            raise ProbeError(f"{folder} exists and is not empty; choose another folder or pass --overwrite.")
        if not (folder / PROBE_JSON).is_file():  # --overwrite replaces probes, never an unrelated folder
            raise ProbeError(
                f"{folder} is not empty and holds no {PROBE_JSON}; --overwrite only replaces a probe folder: "
                "choose a new or empty folder."
            )
    return folder


def save_probe(
    folder: str | os.PathLike,
    kind: str,
    head: nn.Module,
    manifest: Mapping[str, Any],
    class_names: Sequence[str],
    settings: Mapping[str, Any],
    metrics: Mapping[str, Any],
    overwrite: bool = False,
    *,
    store: str | os.PathLike | None = None,
) -> Path:
    """Write `head` and its provenance (from the store `manifest`) into `folder` atomically; returns it.

    Why: a probe is only usable on features made exactly like its training features, so the folder records
    them. The weights are checked to load strictly into the head that `kind` builds before anything is
    written. `store` (the feature store's path) goes into ``source.store``.
    """
    folder = check_probe_target(folder, overwrite)
    entry = _kind(kind, str(folder))
    if entry.wrap is not None:
        head = entry.wrap(head)
    settings = _finite_or_none(_json_round_trip(dict(settings)))
    class_names = [str(name) for name in class_names]
    state = {k: v.detach().cpu().contiguous().clone() for k, v in head.state_dict().items()}
    feature_dim = _feature_dim(manifest, head, folder)
    causal = _causal(head, settings, folder)
    _fill(entry.builder(settings, feature_dim, len(class_names)), state, f"head of probe {folder}")
    model = manifest.get("model") or {}
    record: dict[str, Any] = {
        "schema": PROBE_SCHEMA,
        "kind": kind,
        "class_names": class_names,
        "encoder": {
            "spec": model.get("spec"),
            "weights_sha256": (model.get("provenance") or {}).get("sha256"),
            "feature_dim": feature_dim,
        },
        "preprocessing": _json_round_trip(manifest.get("preprocessing")),
        "fps": manifest.get("fps"),
        "causal": causal,
        "settings": settings,
        "metrics": _finite_or_none(_json_round_trip(dict(metrics))),
        "dataset": manifest.get("dataset"),
        "source": {
            "store": None if store is None else str(Path(store).expanduser().resolve()),
            "created": manifest.get("created"),
            "plstitch_version": manifest.get("plstitch_version"),
        },
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "plstitch_version": __version__,
    }
    tmp = temp_dir_beside(folder)
    try:
        save_file(state, str(tmp / PROBE_WEIGHTS), metadata={"schema": PROBE_SCHEMA, "kind": kind})
        record["weights"] = {"file": PROBE_WEIGHTS, "sha256": sha256_file(tmp / PROBE_WEIGHTS)}
        write_json_atomic(tmp / PROBE_JSON, record)
        _replace_dir(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def save_linear_probe(
    folder: str | os.PathLike,
    features: str | os.PathLike,
    results: Mapping[str, Any],
    fitted: LinearProbeResult,
    overwrite: bool = False,
) -> Path:
    """Save the head the linear protocol chose (`fit_linear_protocol`'s two outputs) as a ``linear`` probe.

    Settings = the results' ``protocol`` block; metrics = its test ``metrics`` (relaxed ones, if computed,
    as ``relaxed_<name>``). Provenance comes from the manifest of the feature store `features`.
    """
    metrics = dict(results["metrics"])
    relaxed = (results.get("relaxed") or {}).get("metrics") or {}
    metrics.update({f"relaxed_{name}": value for name, value in relaxed.items()})
    store = FeatureStore(features)
    return save_probe(
        folder,
        "linear",
        LinearProbeHead.from_result(fitted),
        store.manifest,
        results["class_names"],
        results["protocol"],
        metrics,
        overwrite,
        store=store.root,
    )


def _feature_dim(manifest: Mapping[str, Any], head: nn.Module, folder: Path) -> int:
    """D: the manifest's ``feature_dim`` (top level or ``model``), else the head's; both must agree."""
    recorded = manifest.get("feature_dim") or (manifest.get("model") or {}).get("feature_dim")
    from_head = getattr(head, "feature_dim", None)
    if recorded is not None and from_head is not None and int(recorded) != int(from_head):
        raise ProbeError(
            f"probe {folder}: the head takes {from_head} features per frame but the store manifest says "
            f"{recorded}; train the head on that store's features."
        )
    dim = recorded if recorded is not None else from_head
    if dim is None:
        raise ProbeError(
            f"probe {folder}: cannot tell the feature dim (no feature_dim in the manifest, none on the "
            f"{type(head).__name__}); record feature_dim in the store manifest."
        )
    return int(dim)


def _causal(head: nn.Module, settings: dict, folder: Path) -> bool:
    """Whether the head's output at t depends on frames <= t only: the head's own word, else settings."""
    from_head = getattr(head, "causal", None)
    from_settings = settings.get("causal")
    if from_head is not None and from_settings is not None and bool(from_head) != bool(from_settings):
        raise ProbeError(
            f"probe {folder}: the head is {'' if from_head else 'not '}causal but settings say causal="
            f"{from_settings}; pass the settings the head was built with."
        )
    value = from_head if from_head is not None else from_settings
    if value is None:
        raise ProbeError(
            f"probe {folder}: cannot tell whether the {type(head).__name__} is causal; give it a causal "
            "attribute or record causal in settings."
        )
    return bool(value)


def _replace_dir(tmp: Path, folder: Path) -> None:
    """Rename `tmp` onto `folder`; an existing folder is moved aside first and removed after."""
    if folder.is_dir():
        old = temp_dir_beside(folder)
        os.replace(folder, old)  # onto the fresh empty folder: rename(2) replaces an empty directory
        try:
            os.replace(tmp, folder)
        except BaseException:
            os.replace(old, folder)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, folder)


# -------------------------------------------------------------------------------------------------- load
def load_probe(folder: str | os.PathLike) -> Probe:
    """Read a probe folder: the JSON checked field by field, the weights' sha256 verified, a strict load.

    Why: a probe silently applied with the wrong weights or to other features gives plausible nonsense.
    """
    folder = Path(folder).expanduser()
    path = folder / PROBE_JSON
    if not path.is_file():
        raise ProbeError(
            f"{folder} is not a probe folder (no {PROBE_JSON}); save one with plstitch linear --save DIR."
        )
    record = _read_json(path)
    if record.get("schema") != PROBE_SCHEMA:
        raise ProbeError(
            f"{path}: schema is {record.get('schema')!r}, expected {PROBE_SCHEMA!r}; {RESAVE_FIX} "
            "or use the plstitch version that wrote it."
        )
    kind = _field(record, "kind", str, path)
    entry = _kind(kind, str(path))
    class_names = _field(record, "class_names", list, path)
    encoder = _field(record, "encoder", dict, path)
    feature_dim = encoder.get("feature_dim")
    if not isinstance(feature_dim, int) or isinstance(feature_dim, bool) or feature_dim < 1:
        raise ProbeError(f"{path}: encoder.feature_dim must be a positive integer; {RESAVE_FIX}.")
    settings = _field(record, "settings", dict, path)
    weights = _field(record, "weights", dict, path)
    want_sha = weights.get("sha256")
    if not isinstance(want_sha, str):
        raise ProbeError(f"{path}: weights.sha256 is missing; {RESAVE_FIX}.")
    weights_path = folder / PROBE_WEIGHTS
    if not weights_path.is_file():
        raise ProbeError(f"{weights_path} is missing; copy the whole probe folder, or {RESAVE_FIX}.")
    got_sha = sha256_file(weights_path)
    if got_sha != want_sha:
        raise ProbeError(
            f"{weights_path} has sha256 {got_sha[:12]}… but {PROBE_JSON} records {want_sha[:12]}…; the "
            f"weights were changed after saving: {RESAVE_FIX}."
        )
    state = load_safetensors_file(weights_path, fix=RESAVE_FIX)
    head = entry.builder(settings, feature_dim, len(class_names))
    _fill(head, state, str(weights_path))
    head.eval()
    fps = record.get("fps")
    return Probe(
        kind=kind,
        head=head,
        class_names=[str(n) for n in class_names],
        encoder={
            "spec": encoder.get("spec"),
            "weights_sha256": encoder.get("weights_sha256"),
            "feature_dim": feature_dim,
        },
        preprocessing=record.get("preprocessing"),
        fps=None if fps is None else float(fps),
        causal=bool(_field(record, "causal", bool, path)),
        settings=settings,
        metrics=record.get("metrics") or {},
        dataset=record.get("dataset"),
        source=record.get("source") or {},
        folder=folder,
    )


def _read_json(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ProbeError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); {RESAVE_FIX}."
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ProbeError(f"{path}: cannot be read ({type(exc).__name__}); {RESAVE_FIX}.") from exc
    if not isinstance(record, dict):
        raise ProbeError(f"{path}: holds a JSON {type(record).__name__}, not an object; {RESAVE_FIX}.")
    return record


def _field(record: dict[str, Any], key: str, kind: type, path: Path) -> Any:
    value = record.get(key)
    if not isinstance(value, kind):
        raise ProbeError(
            f"{path}: {key!r} must be a JSON {_JSON_TYPE[kind]}, got {value!r:.60}; {RESAVE_FIX}."
        )
    return value


_JSON_TYPE = {str: "string", list: "array", dict: "object", bool: "true/false"}


def _fill(head: nn.Module, state: Mapping[str, torch.Tensor], source: str) -> None:
    """Strict state-dict load; one-line `ProbeError` listing missing / unexpected / mis-shaped keys."""
    expected = head.state_dict()
    missing, unexpected, wrong_keys = state_dict_mismatch(expected, state)
    wrong = [f"{k} {list(state[k].shape)} != {list(expected[k].shape)}" for k in wrong_keys]
    if missing or unexpected or wrong:
        parts = [
            f"{name} {', '.join(keys[:10])}{' …' if len(keys) > 10 else ''}"
            for name, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong))
            if keys
        ]
        raise ProbeError(
            f"{source} does not fill the {type(head).__name__} exactly ({'; '.join(parts)}); {RESAVE_FIX}."
        )
    try:
        head.load_state_dict(state, strict=True)
    except RuntimeError as exc:  # keys and shapes were checked above; what is left is e.g. a dtype
        raise ProbeError(f"{source} does not load into the {type(head).__name__}; {RESAVE_FIX}.") from exc


# ------------------------------------------------------------------------------------------------- match
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
    want_pre, got_pre = _json_round_trip(probe.preprocessing), _json_round_trip(preprocessing)
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


def _json_round_trip(value: Any) -> Any:
    """`value` as it reads back from JSON (tuples -> lists, numpy scalars -> numbers, paths -> strings)."""
    return json.loads(json.dumps(value, default=json_default))


def _finite_or_none(value: Any) -> Any:
    """NaN / inf -> None (JSON has no NaN), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value
