"""Publishing a probe: its Hub repo folder - `config.json` (the probe record with its backbone pinned),
`probe.safetensors` (the head) and `README.md` (the card) - written from a probe folder, then uploaded.

`write_probe_repo` writes exactly what `push_probe` uploads (`plstitch push-to-hub PROBE_DIR --dry-run --out
DIR` keeps it); the folder is checked to load as a probe before anything is renamed into place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from plstitch_eval.data.datasets import dataset_facts
from plstitch_eval.errors import PublishError
from plstitch_eval.hub.safe_load import sha256_file
from plstitch_eval.hub.upload import PushResult, check_repo_id, list_upload_files, upload_folder
from plstitch_eval.probes.backbone import Backbone, pin_backbone
from plstitch_eval.probes.card import read_probe_results, render_probe_card, results_of
from plstitch_eval.probes.folder import load_probe
from plstitch_eval.probes.licences import CardLicence, LicenceSource, strictest_licence
from plstitch_eval.probes.onnx_files import ONNX_FILES, ONNX_JSON, check_export
from plstitch_eval.probes.probe import PROBE_JSON, PROBE_WEIGHTS, Probe
from plstitch_eval.utils.io import temp_dir_beside, write_json_atomic, write_text_atomic

CONFIG_NAME = "config.json"  # a published probe's record (probe.json's fields, backbone pinned)
CARD_NAME = "README.md"
LIBRARY_NAME = "plstitch"


def is_probe_folder(path: str | os.PathLike) -> bool:
    """True for a folder `plstitch linear/temporal --save` wrote (it holds probe.json)."""
    return (Path(path) / PROBE_JSON).is_file()


def probe_licence(probe: Probe, backbone: Backbone) -> CardLicence:
    """The strictest of the backbone's and the training data's licences (`probes.licences`)."""
    facts = dataset_facts(probe.dataset)
    return strictest_licence(
        [
            LicenceSource(f"backbone {backbone.trained_spec}", backbone.license, backbone.license_source),
            LicenceSource(f"dataset {probe.dataset}", facts.license, facts.license_source),
        ]
    )


def hub_config(probe_dir: Path, backbone: Backbone, licence: CardLicence) -> dict[str, Any]:
    """probe.json as published: the encoder spec is the pinned one, the backbone block and the black-margin
    rule are added, and the local store path is left out."""
    record = json.loads((probe_dir / PROBE_JSON).read_text(encoding="utf-8"))
    record["encoder"] = {**record["encoder"], "spec": backbone.spec}
    record["backbone"] = backbone.to_dict()
    # the rule that cut each video's black border before the resize (None: whole frames)
    record["black_margin"] = (record.get("preprocessing") or {}).get("crop_black_margin")
    record["license"] = licence.license
    record["library_name"] = LIBRARY_NAME
    source = record.get("source") or {}
    record["source"] = {k: v for k, v in source.items() if k != "store"}  # a path on the publisher's disk
    if (probe_dir / ONNX_JSON).is_file():  # an export folder: its graphs go along (`predict --runtime onnx`)
        onnx = json.loads((probe_dir / ONNX_JSON).read_text(encoding="utf-8"))
        record["onnx"] = {"files": list(ONNX_FILES), "opset": onnx.get("opset"), "sha256": onnx.get("sha256")}
    return record


def write_probe_repo(
    probe_dir: str | os.PathLike,
    out: str | os.PathLike,
    repo_id: str,
    *,
    results: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Write the Hub repo folder of the probe in `probe_dir` to `out` (new or empty); returns `out`.

    The probe is loaded (sha256-checked), its backbone pinned (`pin_backbone`), its results JSON (given, or
    results.json in the folder) checked to be its own, and the written folder loaded back as a probe.
    """
    probe_dir, out = Path(probe_dir).expanduser(), Path(out).expanduser()
    check_repo_id(repo_id)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PublishError(
            f"--out {out} exists and is not an empty folder; choose a new folder or delete it."
        )
    probe = load_probe(probe_dir)
    exported = (probe_dir / ONNX_JSON).is_file()
    if exported:  # graphs of another head, or changed since, are refused before anything is written
        check_export(probe_dir, sha256_file(probe_dir / PROBE_WEIGHTS))
    backbone = pin_backbone(probe, cache_dir)
    licence = probe_licence(probe, backbone)
    results_path = results_of(probe_dir, None if results is None else Path(results))
    record = None if results_path is None else read_probe_results(probe, results_path)
    card = render_probe_card(probe, backbone, licence, repo_id, record)
    tmp = temp_dir_beside(out)
    try:
        shutil.copyfile(probe_dir / PROBE_WEIGHTS, tmp / PROBE_WEIGHTS)
        for name in ONNX_FILES if exported else ():
            shutil.copyfile(probe_dir / name, tmp / name)
        write_json_atomic(tmp / CONFIG_NAME, hub_config(probe_dir, backbone, licence))
        write_text_atomic(tmp / CARD_NAME, str(card))
        load_probe(tmp, CONFIG_NAME)  # what a user's `predict --probe hf-hub:...` will read
        if out.is_dir():
            out.rmdir()  # empty (checked above)
        os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def push_probe(
    probe_dir: str | os.PathLike,
    repo_id: str,
    *,
    private: bool = False,
    revision: str = "main",
    commit_message: str | None = None,
    dry_run: bool = False,
    out: str | os.PathLike | None = None,
    results: str | os.PathLike | None = None,
    token: str | None = None,
) -> PushResult:
    """Write the probe's repo folder (to `out`, else a temporary folder) and upload it to `repo_id`; a dry run
    writes and lists it and contacts nobody."""
    with tempfile.TemporaryDirectory(prefix="plstitch-probe-") as scratch:
        folder = write_probe_repo(probe_dir, out or Path(scratch) / "repo", repo_id, results=results)
        files = list_upload_files(folder)
        if dry_run:
            return PushResult(repo_id, revision, files, None, dry_run=True)
        message = commit_message or f"Upload plstitch probe ({len(files)} files)"
        url = upload_folder(
            folder,
            files,
            repo_id,
            private=private,
            revision=revision,
            commit_message=message,
            token=token,
            source=Path(probe_dir),  # a failed upload names the user's folder, not this staging copy
        )
    return PushResult(repo_id, revision, files, url, dry_run=False)
