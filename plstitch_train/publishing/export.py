"""Export a training run (or a checkpoint) as a timm-format folder that plain timm loads, with a model card.

The folder holds `model.safetensors` + `config.json` (timm's schema, loadable with
`timm.create_model("local-dir:DIR")` or `"hf-hub:ORG/NAME"` once pushed), the temporal head
(`temporal_head.safetensors` + `.json`), `plstitch.json` (training config, data summary, version, git commit,
evaluation summary, file hashes) and `README.md`. It is built in a temporary folder, verified (features of the
reloaded model equal the source's) and renamed into place, so a failed export leaves nothing behind.

Results files are accepted only when their features were extracted from the exported weights: the weights
sha256 their feature store recorded (`model.provenance.sha256`, the sha256 of the weights file `load_encoder`
read) must be that of the exported `model.safetensors`, or of the source file holding the same weights (a
run's `backbone/model.safetensors`, or the checkpoint when the features are its teacher's). An unfinished run
(a `last.ckpt` without `backbone/`) exports its latest checkpoint with its temporal head, marked unfinished.

Here the orchestration (`export_model`) and the results check; the pieces: `source` (where the weights come
from, reading them), `plstitch_train.run.status` (how far a run's checkpoint got), `folder` (card contents,
metadata, the reload check and the atomic rename).
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plstitch_eval import __version__
from plstitch_eval.errors import PublishError
from plstitch_eval.hub.ranking_head import HEAD_CONFIG_FILE, HEAD_WEIGHTS_FILE
from plstitch_eval.hub.safe_load import load_checkpoint, sha256_file
from plstitch_eval.hub.timm_format import CONFIG_NAME, WEIGHTS_NAME, save_timm_dir
from plstitch_eval.tables import load_results
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import temp_dir_beside, write_json_atomic, write_text_atomic
from plstitch_eval.utils.outputs import REPLACED_FOLDER, OwnedFiles, check_output_path
from plstitch_train.publishing.cards import render_card
from plstitch_train.publishing.folder import (
    ExportOptions,
    card_info,
    data_summary,
    git_commit,
    replace_dir,
    result_summary,
    source_kind,
    status_record,
    verify_export,
)
from plstitch_train.publishing.source import (
    ExportSource,
    load_backbone,
    resolve_source,
    source_train_config,
    source_weights_sha256,
    teacher_state,
    temporal_head_tensors,
    training_status,
    write_temporal_head,
)
from plstitch_train.run.status import RunProgress, run_progress, trainer_config

__all__ = [  # the export, and the names of the pieces it is composed of (they lived here before)
    "CARD_NAME",
    "EXPORT_SCHEMA",
    "METADATA_NAME",
    "ExportOptions",
    "ExportSource",
    "RunProgress",
    "check_results",
    "data_summary",
    "export_model",
    "git_commit",
    "load_backbone",
    "resolve_source",
    "run_progress",
    "source_train_config",
    "source_weights_sha256",
    "teacher_state",
    "trainer_config",
    "training_status",
    "verify_export",
    "write_temporal_head",
]

EXPORT_SCHEMA = "plstitch.export/v1"
METADATA_NAME = "plstitch.json"
CARD_NAME = "README.md"
EXPORT_FILES = OwnedFiles(  # what an export writes: all `export --overwrite` replaces
    "an export folder",
    (CONFIG_NAME, WEIGHTS_NAME, HEAD_WEIGHTS_FILE, HEAD_CONFIG_FILE, CARD_NAME, METADATA_NAME),
)
_Source = ExportSource  # its name before `plstitch_train.publishing.source`


def check_results(
    results: Sequence[dict[str, Any]],
    paths: Sequence[str | os.PathLike],
    weights_sha256: str,
    src: ExportSource,
    source_sha256: str,
) -> list[str]:
    """Refuse any results file not measured on the exported weights; per file, which digest it matched.

    A results file records the sha256 of the weights its features were extracted with
    (`model.provenance.sha256`, from the feature store's manifest). It must equal the exported
    `model.safetensors`'s, or the source file's when that holds the same weights (a checkpoint's teacher).
    """
    fix = f"extract features with `plstitch extract --model {src.path} ...`, then pass the file that "
    fix += "`plstitch knn` / `plstitch linear` write with `--json FILE`"
    matched = []
    for result, path in zip(results, paths, strict=True):
        model = result.get("model") or {}
        provenance = model.get("provenance") or {}
        measured, spec = provenance.get("sha256"), model.get("spec")
        if not measured:
            raise PublishError(
                f"{path} records no weights sha256 for its model ({spec or 'none'}), so its numbers cannot "
                f"be checked against the exported weights of {src.path}; {fix}."
            )
        if measured == weights_sha256:
            matched.append(WEIGHTS_NAME)
            continue
        if measured == source_sha256 and provenance.get("which", "teacher") == "teacher":
            matched.append(str(src.checkpoint or src.backbone_dir / WEIGHTS_NAME))
            continue
        which = " (its student network)" if measured == source_sha256 else ""
        raise PublishError(
            f"{path} was measured on other weights: model {spec}{which}, weights sha256 {measured[:16]}; the "
            f"export of {src.path} holds weights sha256 {weights_sha256[:16]}. Refusing to publish another "
            f"model's numbers; {fix}."
        )
    return matched


def export_model(
    source: str | os.PathLike,
    out_dir: str | os.PathLike,
    results: Sequence[str | os.PathLike] = (),
    options: ExportOptions | None = None,
) -> Path:
    """Export `source` (run dir or checkpoint) into `out_dir` atomically; returns `out_dir`."""
    options = options or ExportOptions()
    out_dir = check_output_path(out_dir, "--out", REPLACED_FOLDER)
    if out_dir.exists() and not options.overwrite:
        raise PublishError(f"{out_dir} already exists; choose another --out or pass --overwrite.")
    EXPORT_FILES.check(out_dir)  # --overwrite replaces an export, never a folder of the user's files
    src = resolve_source(source)
    results_data = load_results(results)
    checkpoint = load_checkpoint(src.checkpoint) if src.checkpoint is not None else None
    status = training_status(src, checkpoint)
    if status is not None and not status.finished:
        note = status.describe()
        logger.warning("%s: %s; exporting its latest checkpoint %s.", src.path, note, src.checkpoint)
    model, data_config, dropped = load_backbone(src, checkpoint)
    train_config = source_train_config(src, checkpoint)
    summary = data_summary(train_config, src.run_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir_beside(out_dir)
    try:
        save_timm_dir(model, tmp, data_config)
        weights_sha256, source_sha256 = sha256_file(tmp / WEIGHTS_NAME), source_weights_sha256(src)
        matched = check_results(results_data, results, weights_sha256, src, source_sha256)
        if not write_temporal_head(src, checkpoint, tmp) and not temporal_head_tensors(checkpoint):
            logger.warning("No temporal head found next to %s; exporting the backbone only.", src.path)
        verify_export(tmp, model, data_config)
        meta = {
            "schema": EXPORT_SCHEMA,
            "plstitch_version": __version__,
            "git_commit": git_commit(),
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "weights_sha256": weights_sha256,
            "source": {
                "path": str(src.path.resolve()),
                "kind": source_kind(src),
                "sha256": sha256_file(src.checkpoint) if src.checkpoint else None,
                "weights_sha256": source_sha256,
                "dropped_keys": dropped,
            },
            "training_status": status_record(src, status),
            "data_config": data_config.to_dict(),
            "training_config": train_config,
            "data_summary": summary,
            "results": [
                result_summary(r, p, m) for r, p, m in zip(results_data, results, matched, strict=True)
            ],
        }
        info = card_info(tmp, out_dir.name, options, train_config, summary, results_data, meta)
        write_text_atomic(tmp / CARD_NAME, str(render_card(info)))
        meta["files"] = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        write_json_atomic(tmp / METADATA_NAME, meta)
        replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("Exported %s -> %s", src.path, out_dir)
    return out_dir
