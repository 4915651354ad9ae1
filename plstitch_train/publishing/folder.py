"""What an export folder holds besides the weights, and how it comes into place: the card's contents, the
data summary and source commit recorded in `plstitch.json`, the check that plain timm reloads the same model,
and the rename that puts the finished folder where it belongs (so a failed export leaves nothing behind).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import timm
import torch
from torch import nn

from plstitch_eval import __version__
from plstitch_eval.errors import CheckpointError, PublishError
from plstitch_eval.hub.ranking_head import HEAD_WEIGHTS_FILE
from plstitch_eval.hub.run_folder import read_log
from plstitch_eval.hub.timm_format import CONFIG_NAME, WEIGHTS_NAME
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.utils.outputs import replace_folder
from plstitch_train.publishing.cards import (
    CardInfo,
    architecture_text,
    card_licence,
    eval_results_from_results,
)
from plstitch_train.publishing.source import ExportSource
from plstitch_train.run.status import RunProgress

__all__ = ["ExportOptions", "card_info", "data_summary", "git_commit", "replace_dir", "verify_export"]

_DATA_KEY_HINTS = ("data", "video", "fps", "split", "frames", "clip", "crop", "img_size", "image_size")


@dataclass
class ExportOptions:
    """What the card says about the export; `repo_id` only fills the usage snippet."""

    model_name: str | None = None
    license: str | None = None  # None: MIT, or the non-commercial licence of the initial weights
    repo_id: str | None = None
    description: str = ""
    tags: list[str] = field(default_factory=list)
    overwrite: bool = False


def data_summary(train_config: dict[str, Any], run_dir: Path | None) -> dict[str, Any]:
    """Data settings of the training config (dataset, fps, clip sampling, crops) and the last log step."""
    summary: dict[str, Any] = {}
    for key, value in train_config.items():
        if any(hint in key.lower() for hint in _DATA_KEY_HINTS):
            summary[key] = value
    records = read_log(run_dir) if run_dir is not None else []
    if records:
        summary["last_log"] = {
            k: v for k, v in records[-1].items() if k in ("epoch", "step", "iteration", "loss")
        }
    return summary


def git_commit(path: Path | None = None) -> str:
    """The commit of the source tree holding plstitch (or `path`), or "unknown" outside a git checkout."""
    where = path or Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and len(commit) == 40 else "unknown"


def _features(model: nn.Module, images: torch.Tensor) -> torch.Tensor:
    """Frame feature: CLS after the final norm for ViTs, pooled pre-logits otherwise."""
    with torch.no_grad():
        tokens = model.forward_features(images)
        return tokens[:, 0] if tokens.ndim == 3 else model.forward_head(tokens, pre_logits=True)


def verify_export(folder: Path, reference: nn.Module, data_config: DataConfig) -> None:
    """Reload `folder` with plain timm and check its features equal `reference`'s bit for bit."""
    loaded = timm.create_model(f"local-dir:{folder.resolve()}", pretrained=True).eval()
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(2, *data_config.input_size, generator=generator)
    if not torch.equal(_features(loaded, images), _features(reference, images)):
        raise PublishError(f"{folder}: the exported weights do not reproduce the source model's features.")


def card_info(
    folder: Path,
    final_name: str,
    options: ExportOptions,
    train_config: dict,
    summary: dict,
    results: list[dict],
    meta: dict,
) -> CardInfo:
    """Card contents for the export being built in `folder` (renamed to `final_name` afterwards)."""
    config = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))
    cfg = config["pretrained_cfg"]
    name = options.model_name or (options.repo_id.split("/")[-1] if options.repo_id else final_name)
    licence, licence_source = card_licence(options.license, train_config.get("init"))
    spec = f"hf-hub:{options.repo_id}" if options.repo_id else f"local-dir:{final_name}"
    usage = (
        "import timm\n"
        f'model = timm.create_model("{spec}", pretrained=True).eval()\n'
        "cfg = timm.data.resolve_data_config({}, model=model)\n"
        "transform = timm.data.create_transform(**cfg)\n"
        "features = model(transform(image).unsqueeze(0))  # CLS token after the final norm\n"
    )
    if (folder / HEAD_WEIGHTS_FILE).is_file():
        usage += (
            "\n# temporal head (one ranking score per frame; higher = earlier in the procedure)\n"
            "from plstitch_eval.hub.ranking_head import load_temporal_head\n"
            "head = load_temporal_head(model_dir)  # folder with temporal_head.*\n"
            "scores = head(frame_features[None])  # [1, K] for K frames\n"
        )
    training_data = "\n".join(f"- `{k}`: `{v}`" for k, v in summary.items()) or "Not recorded in the run."
    description = options.description or (
        f"A PL-Stitch frame encoder exported by plstitch {__version__}: self-supervised pretraining with a "
        "Plackett-Luce ranking objective over frame order, a spatio-temporal jigsaw and iBOT masked image "
        "modelling."
    )
    return CardInfo(
        model_name=name,
        title=f"PL-Stitch: {name}",
        description=description,
        architecture=architecture_text(config),
        feature=f"{config.get('num_features')}-d CLS token after the final norm",
        preprocessing=DataConfig.from_pretrained_cfg(cfg).describe(),
        usage=usage,
        license=licence,
        license_source=licence_source,
        pretraining_data=str(
            summary.get("dataset") or summary.get("data") or "see the training configuration"
        ),
        training_data=training_data,
        training_config=train_config or None,
        eval_results=eval_results_from_results(results),
        provenance={
            "plstitch version": meta["plstitch_version"],
            "git commit": meta["git_commit"],
            f"{WEIGHTS_NAME} sha256": meta["weights_sha256"],
        },
        tags=options.tags,
        status=(meta["training_status"] or {}).get("note") or "",
    )


def source_kind(src: ExportSource) -> str:
    """`run_dir` (finished or not), `checkpoint` (a file) or `timm_dir`."""
    if src.run_dir is not None and src.path.is_dir():
        return "run_dir"
    return "checkpoint" if src.checkpoint is not None else "timm_dir"


def status_record(src: ExportSource, status: RunProgress | None) -> dict[str, Any] | None:
    """plstitch.json's `training_status`: a run checkpoint's progress, `finished` for a finished run."""
    if status is not None:
        return {**status.to_dict(), "checkpoint": str(src.checkpoint)}
    return {"finished": True} if src.backbone_dir is not None and src.run_dir is not None else None


def result_summary(result: dict[str, Any], path: str | os.PathLike, matched: str) -> dict[str, Any]:
    """What of a results JSON goes into plstitch.json (no per-video predictions)."""
    model = result.get("model") or {}
    return {
        "file": Path(path).name,
        "task": result["task"],
        "dataset": result["dataset"],
        "model": {
            "spec": model.get("spec"),
            "weights_sha256": (model.get("provenance") or {}).get("sha256"),
            "matched": matched,
        },
        "protocol": result.get("protocol", {}),
        "metrics": result["metrics"],
        "created": result.get("created"),
    }


def replace_dir(tmp: Path, out_dir: Path) -> None:
    """Rename `tmp` onto `out_dir`; an existing `out_dir` is moved aside first and removed after."""
    if not out_dir.exists():
        os.replace(tmp, out_dir)
        return
    if not out_dir.is_dir():
        raise CheckpointError(f"{out_dir} exists and is not a folder; remove it or choose another --out.")
    replace_folder(tmp, out_dir)  # the old folder put back if the rename fails
