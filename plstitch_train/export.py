"""Export a training run (or a checkpoint) as a timm-format folder that plain timm loads, with a model card.

The folder holds `model.safetensors` + `config.json` (timm's schema, loadable with
`timm.create_model("local-dir:DIR")` or `"hf-hub:ORG/NAME"` once pushed), the temporal head
(`temporal_head.safetensors` + `.json`), `plstitch.json` (training config, data summary, version, git commit,
evaluation summary, file hashes) and `README.md`. It is built in a temporary folder, verified (features of the
reloaded model equal the source's) and renamed into place, so a failed export leaves nothing behind.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import timm
import torch
from torch import nn

from plstitch_eval import __version__
from plstitch_eval.errors import CheckpointError, PublishError, RunFolderError
from plstitch_eval.hub.convert import (
    CONVNEXT_TOP_LEVEL,
    VIT_TOP_LEVEL,
    find_num_heads,
    load_strict,
    model_from_checkpoint,
    split_backbone,
    unwrap_state_dict,
)
from plstitch_eval.hub.run_folder import (
    BACKBONE_DIR,
    CHECKPOINT_NAME,
    backbone_dir,
    is_finished,
    read_log,
    read_train_config,
)
from plstitch_eval.hub.safe_load import load_checkpoint, sha256_file
from plstitch_eval.hub.temporal_head import (
    HEAD_CONFIG_FILE,
    HEAD_WEIGHTS_FILE,
    load_temporal_head,
    save_temporal_head,
)
from plstitch_eval.hub.timm_format import (
    CONFIG_NAME,
    WEIGHTS_NAME,
    is_timm_dir,
    load_timm_dir,
    read_data_config,
    save_timm_dir,
)
from plstitch_eval.preprocess import DataConfig
from plstitch_eval.tables import load_results
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import temp_dir_beside, write_json_atomic, write_text_atomic
from plstitch_train.cards import CardInfo, architecture_text, eval_results_from_results, render_card

EXPORT_SCHEMA = "plstitch.export/v1"
METADATA_NAME = "plstitch.json"
CARD_NAME = "README.md"
_DATA_KEY_HINTS = ("data", "video", "fps", "split", "frames", "clip", "crop", "img_size", "image_size")


@dataclass
class ExportOptions:
    """What the card says about the export; `repo_id` only fills the usage snippet."""

    model_name: str | None = None
    license: str = "mit"
    repo_id: str | None = None
    description: str = ""
    tags: list[str] = field(default_factory=list)
    overwrite: bool = False


@dataclass
class _Source:
    """Where the backbone, temporal head and training config of an export come from."""

    path: Path
    run_dir: Path | None
    checkpoint: Path | None
    backbone_dir: Path | None


def resolve_source(source: str | os.PathLike) -> _Source:
    """A run directory (`backbone/` inside), a timm folder, or a checkpoint file (run dir = its folder)."""
    path = Path(source).expanduser()
    if path.is_dir():
        if is_finished(path):
            return _Source(path, path, None, backbone_dir(path))
        if is_timm_dir(path):
            return _Source(path, None, None, path)
        raise PublishError(
            f"{path} is neither a finished training run directory (with {BACKBONE_DIR}/{CONFIG_NAME} and "
            f"{BACKBONE_DIR}/{WEIGHTS_NAME}) nor a timm folder; pass the run directory or its "
            f"{CHECKPOINT_NAME}."
        )
    if path.is_file():
        run_dir = path.parent
        return _Source(path, run_dir, path, backbone_dir(run_dir) if is_finished(run_dir) else None)
    raise PublishError(f"{path} does not exist; pass a training run directory or a checkpoint file.")


def teacher_state(checkpoint: Any) -> tuple[dict[str, torch.Tensor], list[str]]:
    """(teacher tensors without containers and prefixes, the trainer's `vit.` too; leftover head keys)."""
    state = unwrap_state_dict(checkpoint, "teacher")
    leftovers = sorted(k for k in state if k.startswith(("teacher.", "student.")))
    kept = {key.removeprefix("vit."): tensor for key, tensor in state.items() if key not in leftovers}
    return kept, leftovers


def load_backbone(src: _Source, checkpoint: Any = None) -> tuple[nn.Module, DataConfig, list[str]]:
    """(backbone in eval mode, eval preprocessing, dropped training-only keys), loaded strictly.

    A checkpoint's teacher weights fill the architecture recorded in the run's `backbone/config.json` when
    there is one (exact constructor arguments), otherwise the architecture inferred from the tensor shapes.
    `checkpoint` is the already loaded `src.checkpoint` (loaded here when None).
    """
    if src.checkpoint is None:
        model, data_config = load_timm_dir(src.backbone_dir)
        return model, data_config, []
    if checkpoint is None:
        checkpoint = load_checkpoint(src.checkpoint)
    state, leftovers = teacher_state(checkpoint)
    if src.backbone_dir is None:
        num_heads = find_num_heads(checkpoint)
        model, dropped = model_from_checkpoint(state, "teacher", num_heads, source=str(src.checkpoint))
        size = model.patch_embed.img_size[0] if hasattr(model, "patch_embed") else 224
        return model.eval(), DataConfig.for_size(size), sorted(dropped + leftovers)
    config = json.loads((src.backbone_dir / CONFIG_NAME).read_text(encoding="utf-8"))
    model = timm.create_model(
        config["architecture"],
        pretrained=False,
        num_classes=config.get("num_classes", 0),
        **config["model_args"],
    )
    top_level = CONVNEXT_TOP_LEVEL if config["architecture"].startswith("convnext") else VIT_TOP_LEVEL
    backbone, dropped = split_backbone(state, top_level)
    load_strict(model, backbone, str(src.checkpoint))
    return model.eval(), read_data_config(src.backbone_dir), sorted(dropped + leftovers)


def write_temporal_head(src: _Source, checkpoint: Any, out_dir: Path) -> bool:
    """Put the temporal head into `out_dir`: the checkpoint's weights when it has them, else `backbone/`'s.

    Constructor arguments come from `backbone/temporal_head.json`; returns False when there is no head.
    """
    if src.backbone_dir is None or not (src.backbone_dir / HEAD_CONFIG_FILE).is_file():
        return False
    head = load_temporal_head(src.backbone_dir)  # refuses weights that do not match the json
    state = _temporal_head_tensors(checkpoint) if checkpoint is not None else {}
    if state:
        load_strict(head, state, f"{src.checkpoint} (temporal head)")
    save_temporal_head(head, out_dir)
    return True


def _temporal_head_tensors(checkpoint: Any) -> dict[str, torch.Tensor]:
    """`*temporal_head.<name>` tensors of a training checkpoint (student side), keyed by `<name>`."""
    if not isinstance(checkpoint, Mapping):
        return {}
    container = next(
        (checkpoint[k] for k in ("model", "state_dict") if isinstance(checkpoint.get(k), Mapping)), None
    )
    container = checkpoint if container is None else container
    marker = "temporal_head."
    return {
        key.split(marker, 1)[1]: tensor
        for key, tensor in container.items()
        if isinstance(tensor, torch.Tensor) and marker in key and not key.startswith("teacher.")
    }


def source_train_config(src: _Source, checkpoint: Any = None) -> dict[str, Any]:
    """`train_config.json` of the run, else the checkpoint's `config` entry, else {}."""
    if src.run_dir is not None:
        try:
            settings = read_train_config(src.run_dir)
        except RunFolderError as exc:
            raise PublishError(str(exc)) from exc
        if settings is not None:
            return settings
    if checkpoint is not None:
        config = checkpoint.get("config") if isinstance(checkpoint, dict) else None
        if isinstance(config, dict):
            return config
    return {}


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


def _card_info(
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
            "from plstitch_eval.hub.temporal_head import load_temporal_head\n"
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
        license=options.license,
        pretraining_data=str(
            summary.get("dataset") or summary.get("data") or "see the training configuration"
        ),
        training_data=training_data,
        training_config=train_config or None,
        eval_results=eval_results_from_results(results),
        provenance={"plstitch version": meta["plstitch_version"], "git commit": meta["git_commit"]},
        tags=options.tags,
    )


def export_model(
    source: str | os.PathLike,
    out_dir: str | os.PathLike,
    results: Sequence[str | os.PathLike] = (),
    options: ExportOptions | None = None,
) -> Path:
    """Export `source` (run dir or checkpoint) into `out_dir` atomically; returns `out_dir`."""
    options = options or ExportOptions()
    out_dir = Path(out_dir).expanduser()
    if out_dir.exists() and not options.overwrite:
        raise PublishError(f"{out_dir} already exists; choose another --out or pass --overwrite.")
    src = resolve_source(source)
    results_data = load_results(results)
    checkpoint = load_checkpoint(src.checkpoint) if src.checkpoint is not None else None
    model, data_config, dropped = load_backbone(src, checkpoint)
    train_config = source_train_config(src, checkpoint)
    summary = data_summary(train_config, src.run_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir_beside(out_dir)
    try:
        save_timm_dir(model, tmp, data_config)
        if not write_temporal_head(src, checkpoint, tmp):
            logger.warning("No temporal head found next to %s; exporting the backbone only.", src.path)
        verify_export(tmp, model, data_config)
        meta = {
            "schema": EXPORT_SCHEMA,
            "plstitch_version": __version__,
            "git_commit": git_commit(),
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "source": {
                "path": str(src.path.resolve()),
                "kind": "checkpoint" if src.checkpoint else "run_dir" if src.run_dir else "timm_dir",
                "sha256": sha256_file(src.checkpoint) if src.checkpoint else None,
                "dropped_keys": dropped,
            },
            "data_config": data_config.to_dict(),
            "training_config": train_config,
            "data_summary": summary,
            "results": [_result_summary(r, p) for r, p in zip(results_data, results, strict=True)],
        }
        card = render_card(_card_info(tmp, out_dir.name, options, train_config, summary, results_data, meta))
        write_text_atomic(tmp / CARD_NAME, str(card))
        meta["files"] = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        write_json_atomic(tmp / METADATA_NAME, meta)
        _replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("Exported %s -> %s", src.path, out_dir)
    return out_dir


def _result_summary(result: dict[str, Any], path: str | os.PathLike) -> dict[str, Any]:
    """What of a results JSON goes into plstitch.json (no per-video predictions)."""
    return {
        "file": Path(path).name,
        "task": result["task"],
        "dataset": result["dataset"],
        "protocol": result.get("protocol", {}),
        "metrics": result["metrics"],
        "created": result.get("created"),
    }


def _replace_dir(tmp: Path, out_dir: Path) -> None:
    """Rename `tmp` onto `out_dir`; an existing `out_dir` is moved aside first and removed after."""
    if not out_dir.exists():
        os.replace(tmp, out_dir)
        return
    if not out_dir.is_dir():
        raise CheckpointError(f"{out_dir} exists and is not a folder; remove it or choose another --out.")
    old = out_dir.with_name(f".{out_dir.name}.old")
    shutil.rmtree(old, ignore_errors=True)
    os.replace(out_dir, old)
    os.replace(tmp, out_dir)
    shutil.rmtree(old, ignore_errors=True)
