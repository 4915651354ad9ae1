"""The ONNX files an export folder adds to a probe (`plstitch export-onnx`), so that publishing
(`push-to-hub` of an export folder) and loading (`predict --runtime onnx`, from a folder or ``hf-hub:``) agree
on them, and the graphs are tied to the head they were made from (`check_export`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.probes.probe import ProbeError

RECOGNIZER, HEAD, ONNX_JSON = "recognizer.onnx", "head.onnx", "onnx.json"
GRAPHS = (RECOGNIZER, HEAD)
ONNX_FILES = (ONNX_JSON, *GRAPHS)
ONNX_SCHEMA = "plstitch-onnx/1"


def export_hint(name: str) -> str:
    """How to make an export of the probe `name` (a folder or an ``hf-hub:`` id) and run it."""
    return f"make one with plstitch export-onnx {name} --out DIR, then predict --probe DIR --runtime onnx"


def read_onnx_record(folder: str | Path, name: str | None = None) -> dict[str, Any]:
    """The `onnx.json` of the export in `folder` (`name`: how the user named it); one line when there is none
    or it is of another schema."""
    folder = Path(folder).expanduser()
    name = name or str(folder)
    path = folder / ONNX_JSON
    if not path.is_file():
        raise ProbeError(f"{name} holds no ONNX export ({ONNX_JSON}); {export_hint(name)}.")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProbeError(f"{path} is unreadable ({exc}); export again: {export_hint(name)}.") from None
    if not isinstance(record, dict) or record.get("schema") != ONNX_SCHEMA:
        schema = record.get("schema") if isinstance(record, dict) else None
        raise ProbeError(f"{path}: schema {schema!r}, expected {ONNX_SCHEMA!r}; {export_hint(name)}.")
    return record


def graph_digests(folder: Path) -> dict[str, str]:
    """sha256 of each graph file in `folder` (what `onnx.json` records under `sha256`)."""
    return {graph: sha256_file(folder / graph) for graph in GRAPHS}


def check_export(
    folder: str | Path, head_sha256: str | None, name: str | None = None, record: dict | None = None
) -> dict[str, Any]:
    """The export's record, once its graphs are the ones it records (sha256) and it was made from the head
    whose weights have `head_sha256`; else one line naming both digests and the fix."""
    folder = Path(folder).expanduser()
    name = name or str(folder)
    record = record if record is not None else read_onnx_record(folder, name)
    made_from = record.get("probe_sha256")
    if made_from is not None and head_sha256 is not None and made_from != head_sha256:
        raise ProbeError(
            f"{folder / ONNX_JSON} was exported from a head with sha256 {made_from[:12]}…, but the probe's "
            f"weights have {head_sha256[:12]}…; export again: {export_hint(name)}."
        )
    for graph, want in (record.get("sha256") or {}).items():
        path = folder / graph
        if not path.is_file():
            raise ProbeError(f"{path} is missing; copy the whole export folder, or {export_hint(name)}.")
        got = sha256_file(path)
        if got != want:
            raise ProbeError(
                f"{path} has sha256 {got} but {ONNX_JSON} records {want}; the graph was changed after "
                f"export: {export_hint(name)}."
            )
    return record
