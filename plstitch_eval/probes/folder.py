"""A probe folder on disk: `save_probe` writes the head and the provenance of its features atomically,
`load_probe` reads them back (the JSON checked field by field, the weights' sha256 verified, a strict load).
The format and the mismatch rules are documented in docs/probes.md.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from safetensors.torch import save_file
from torch import nn

from plstitch_eval import __version__
from plstitch_eval.hub.safe_load import load_safetensors_file, sha256_file
from plstitch_eval.linear_grid import LinearProbeResult
from plstitch_eval.probes.kinds import (
    LinearProbeHead,
    RegressionHead,
    build_head,
    fill_head,
    is_regression,
    registered_kind,
)
from plstitch_eval.probes.onnx_files import ONNX_FILES
from plstitch_eval.probes.probe import (
    MULTILABEL_HEAD,
    PROBE_JSON,
    PROBE_SCHEMA,
    PROBE_WEIGHTS,
    RESAVE_FIX,
    Probe,
    ProbeError,
    json_round_trip,
)
from plstitch_eval.store.features import FeatureStore
from plstitch_eval.utils.io import atomic_path, temp_dir_beside, write_json_atomic
from plstitch_eval.utils.outputs import REPLACED_FOLDER, OwnedFiles, check_output_path, replace_folder

# what `--save DIR --overwrite` replaces: a probe, or an ONNX export of one (`export-onnx`)
PROBE_FILES = OwnedFiles("a probe folder", (PROBE_JSON, PROBE_WEIGHTS, *ONNX_FILES))


def check_probe_target(folder: str | os.PathLike, overwrite: bool = False) -> Path:
    """Refuse (`ProbeError`) a target that is a file, or a non-empty folder unless `overwrite`; with it, a
    folder holding anything but a probe's files (`PROBE_FILES`), naming the first such entry; and (one line,
    `check_output_path`) `.`, `..` or a path under a regular file.

    Why: called before training, so a long run is not thrown away at the end; `save_probe` checks again.
    """
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ProbeError(f"{folder} exists and is not a folder; choose another probe folder.")
    check_output_path(folder, "--save", REPLACED_FOLDER)
    if folder.is_dir() and any(folder.iterdir()):
        if not overwrite:
            raise ProbeError(f"{folder} exists and is not empty; choose another folder or pass --overwrite.")
        if not (folder / PROBE_JSON).is_file():  # --overwrite replaces probes, never an unrelated folder
            raise ProbeError(
                f"{folder} is not empty and holds no {PROBE_JSON}; --overwrite only replaces a probe folder: "
                "choose a new or empty folder."
            )
        PROBE_FILES.check(folder, "--save")
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
    task: Mapping[str, Any] | None = None,
) -> Path:
    """Write `head` and its provenance (from the store `manifest`) into `folder` atomically; returns it.

    Why: a probe is only usable on features made exactly like its training features, so the folder records
    them. The weights are checked to load strictly into the head that `kind` builds before anything is
    written. `store` (the feature store's path) goes into ``source.store``. `task`: a regression task's
    block (`head` a `RegressionHead`; `class_names` are then its outputs).
    """
    folder = check_probe_target(folder, overwrite)
    entry = registered_kind(kind, str(folder))
    if is_regression(task) != isinstance(head, RegressionHead):
        raise ProbeError(f"probe {folder}: a regression task's probe needs a RegressionHead, and only it.")
    if entry.wrap is not None and not isinstance(head, RegressionHead):
        head = entry.wrap(head)
    settings = _finite_or_none(json_round_trip(dict(settings)))
    class_names = [str(name) for name in class_names]
    state = {k: v.detach().cpu().contiguous().clone() for k, v in head.state_dict().items()}
    feature_dim = _feature_dim(manifest, head, folder)
    causal = _causal(head, settings, folder)
    task = None if task is None else _finite_or_none(json_round_trip(dict(task)))
    check_multilabel_task(task, len(class_names), str(folder))
    empty = build_head(kind, settings, feature_dim, len(class_names), task, str(folder))
    fill_head(empty, state, f"head of probe {folder}")
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
        "preprocessing": json_round_trip(manifest.get("preprocessing")),
        "fps": manifest.get("fps"),
        "causal": causal,
        "settings": settings,
        "metrics": _finite_or_none(json_round_trip(dict(metrics))),
        "dataset": manifest.get("dataset"),
        "source": {
            "store": None if store is None else str(Path(store).expanduser().resolve()),
            "created": manifest.get("created"),
            "plstitch_version": manifest.get("plstitch_version"),
        },
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "plstitch_version": __version__,
    }
    if task is not None:
        record["task"] = task
    tmp = temp_dir_beside(folder)
    try:
        with atomic_path(tmp / PROBE_WEIGHTS) as weights:  # save_file makes 0600 files: umask perms
            save_file(state, str(weights), metadata={"schema": PROBE_SCHEMA, "kind": kind})
        record["weights"] = {"file": PROBE_WEIGHTS, "sha256": sha256_file(tmp / PROBE_WEIGHTS)}
        write_json_atomic(tmp / PROBE_JSON, record)
        replace_folder(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def save_linear_probe(
    folder: str | os.PathLike,
    features: str | os.PathLike,
    results: Mapping[str, Any],
    fitted: LinearProbeResult,
    overwrite: bool = False,
    task: Mapping[str, Any] | None = None,
) -> Path:
    """Save the head the linear protocol chose (`fit_linear_protocol`'s two outputs) as a ``linear`` probe.

    Settings = the results' ``protocol`` block; metrics = its test ``metrics`` (relaxed ones, if computed,
    as ``relaxed_<name>``). Provenance comes from the manifest of the feature store `features`. `task`: a
    multi-label task's block (`protocols.multilabel_probe.task_block`); None: a phase probe.
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
        task=task,
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


def load_probe(folder: str | os.PathLike, record_name: str = PROBE_JSON) -> Probe:
    """Read a probe folder: the JSON checked field by field, the weights' sha256 verified, a strict load.

    Why: a probe silently applied with the wrong weights or to other features gives plausible nonsense.
    `record_name`: the JSON's file name (a published probe's is config.json, `probes.publish`).
    """
    folder = Path(folder).expanduser()
    path = folder / record_name
    if not path.is_file():
        raise ProbeError(
            f"{folder} is not a probe folder (no {record_name}); save one with plstitch linear --save DIR."
        )
    record = _read_json(path)
    if record.get("schema") != PROBE_SCHEMA:
        raise ProbeError(
            f"{path}: schema is {record.get('schema')!r}, expected {PROBE_SCHEMA!r}; {RESAVE_FIX} "
            "or use the plstitch version that wrote it."
        )
    kind = _field(record, "kind", str, path)
    registered_kind(kind, str(path))
    task = record.get("task")
    if task is not None and not (isinstance(task, dict) and isinstance(task.get("columns", []), list)):
        raise ProbeError(f"{path}: 'task' must be a JSON object with a columns array; {RESAVE_FIX}.")
    class_names = _field(record, "class_names", list, path)
    check_multilabel_task(task, len(class_names), str(path))
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
            f"{weights_path} has sha256 {got_sha[:12]}… but {record_name} records {want_sha[:12]}…; the "
            f"weights were changed after saving: {RESAVE_FIX}."
        )
    state = load_safetensors_file(weights_path, fix=RESAVE_FIX)
    head = build_head(kind, settings, feature_dim, len(class_names), task, str(path))
    fill_head(head, state, str(weights_path))
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
        task=task,
    )


def check_multilabel_task(task: Mapping[str, Any] | None, labels: int, where: str) -> None:
    """A multi-label task block (head ``multi-label``) names a column and a threshold in (0, 1) per label,
    and a linear head; one `ProbeError` line otherwise (other blocks pass)."""
    if not task or task.get("head") != MULTILABEL_HEAD:
        return
    columns, thresholds = task.get("columns"), task.get("thresholds")
    fine = isinstance(columns, list) and isinstance(thresholds, list)
    fine = fine and len(columns) == labels == len(thresholds) and len(set(map(str, columns))) == labels
    fine = fine and all(_number(t) and 0.0 < t < 1.0 for t in thresholds)
    if not fine:
        raise ProbeError(
            f"{where}: a multi-label task block needs one distinct column and one threshold in (0, 1) per "
            f"label ({labels} labels); {RESAVE_FIX}."
        )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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


def _finite_or_none(value: Any) -> Any:
    """NaN / inf -> None (JSON has no NaN), recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value
