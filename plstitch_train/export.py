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
from plstitch_eval.errors import CheckpointError, ConfigError, PublishError, RunFolderError
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
    is_run_dir,
    read_log,
    read_train_config,
)
from plstitch_eval.hub.safe_load import load_checkpoint, sha256_file
from plstitch_eval.hub.temporal_head import (
    HEAD_CONFIG_FILE,
    HEAD_WEIGHTS_FILE,
    load_temporal_head,
    save_temporal_head,
    temporal_head_from_state_dict,
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
from plstitch_train.cards import (
    CardInfo,
    architecture_text,
    card_licence,
    eval_results_from_results,
    render_card,
)
from plstitch_train.model import build_vit
from plstitch_train.presets import TrainConfig

EXPORT_SCHEMA = "plstitch.export/v1"
METADATA_NAME = "plstitch.json"
CARD_NAME = "README.md"
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


@dataclass
class _Source:
    """Where the backbone, temporal head and training config of an export come from."""

    path: Path
    run_dir: Path | None
    checkpoint: Path | None
    backbone_dir: Path | None


@dataclass(frozen=True)
class RunProgress:
    """How far the run behind a checkpoint got: step reached, planned total, epoch of its last step.

    `total_steps` is None when the checkpoint cannot tell it (stopped in the first epoch, so the number of
    steps per epoch is unknown); `epoch` is 1-based, the epoch the last step belonged to.
    """

    step: int
    total_steps: int | None
    epoch: int | None
    epochs: int | None

    @property
    def finished(self) -> bool:
        """True when the checkpoint holds the planned last step."""
        return self.total_steps is not None and self.step >= self.total_steps

    def describe(self) -> str:
        """The card's and the log's words: `unfinished run: stopped at step 3 of 4 (epoch 2 of 2)`."""
        epochs = f"epoch {self.epoch} of {self.epochs}" if self.epoch and self.epochs else ""
        if self.total_steps is not None:
            where = f"step {self.step} of {self.total_steps}" + (f" ({epochs})" if epochs else "")
        else:
            where = f"step {self.step} of an unrecorded total ({epochs + '; ' if epochs else ''}"
            where += "the checkpoint does not record the planned number of steps)"
        return f"unfinished run: stopped at {where}"

    def to_dict(self) -> dict[str, Any]:
        """What plstitch.json records under `training_status`."""
        return {
            "finished": self.finished,
            "step": self.step,
            "total_steps": self.total_steps,
            "epoch": self.epoch,
            "epochs": self.epochs,
            "note": None if self.finished else self.describe(),
        }


def resolve_source(source: str | os.PathLike) -> _Source:
    """A run directory (finished: `backbone/`; unfinished: its `last.ckpt`), a timm folder, or a checkpoint
    file (run dir = its folder)."""
    path = Path(source).expanduser()
    if path.is_dir():
        if is_finished(path):
            return _Source(path, path, None, backbone_dir(path))
        if is_timm_dir(path):
            return _Source(path, None, None, path)
        if (path / CHECKPOINT_NAME).is_file():  # an unfinished run: its latest checkpoint
            return _Source(path, path, path / CHECKPOINT_NAME, None)
        if is_run_dir(path):
            raise PublishError(
                f"{path} is a training run stopped before its first checkpoint (no {CHECKPOINT_NAME}), so it "
                f"holds no trained weights; resume it with `plstitch train --resume {path}`."
            )
        raise PublishError(
            f"{path} is neither a training run directory ({BACKBONE_DIR}/ or {CHECKPOINT_NAME}) nor a timm "
            f"folder ({CONFIG_NAME} + {WEIGHTS_NAME}); pass a run directory, its {CHECKPOINT_NAME} or an "
            "exported folder."
        )
    if path.is_file():
        run_dir = path.parent
        return _Source(path, run_dir, path, backbone_dir(run_dir) if is_finished(run_dir) else None)
    raise PublishError(f"{path} does not exist; pass a training run directory or a checkpoint file.")


def trainer_config(checkpoint: Any) -> TrainConfig | None:
    """The `TrainConfig` a `plstitch train` checkpoint was made with; None for any other checkpoint."""
    if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("config"), Mapping):
        return None
    if not isinstance(checkpoint.get("model"), Mapping):
        return None
    try:
        return TrainConfig.from_dict(dict(checkpoint["config"]))
    except (ConfigError, TypeError, ValueError):
        return None


def run_progress(checkpoint: Mapping[str, Any], config: TrainConfig) -> RunProgress:
    """Step, planned total and epoch of a `plstitch train` checkpoint.

    Why derived: the checkpoint records the step and the sampler's next position (epoch, micro-batch), so
    once an epoch is complete, steps per epoch = (step - steps into the current epoch) / epoch, and the
    planned total is epochs x that (capped by `max_steps`). A `total_steps` entry, when present, wins.
    """
    step = int(checkpoint["step"])
    sampler = checkpoint.get("sampler") if isinstance(checkpoint.get("sampler"), Mapping) else {}
    next_epoch, next_batch = sampler.get("epoch"), sampler.get("batch")
    total = checkpoint.get("total_steps")
    epoch = None
    if isinstance(next_epoch, int) and isinstance(next_batch, int):
        into_epoch = next_batch // max(config.accum_steps, 1)
        epoch = next_epoch + 1 if into_epoch else next_epoch  # the epoch of the last step (1-based)
        if not isinstance(total, int) and next_epoch >= 1 and (step - into_epoch) % next_epoch == 0:
            per_epoch = (step - into_epoch) // next_epoch
            total = config.epochs * per_epoch
            total = min(total, config.max_steps) if config.max_steps is not None else total
    return RunProgress(step, total if isinstance(total, int) else None, epoch, config.epochs)


def teacher_state(checkpoint: Any) -> tuple[dict[str, torch.Tensor], list[str]]:
    """(teacher tensors without containers and prefixes, the trainer's `vit.` too; leftover head keys)."""
    state = unwrap_state_dict(checkpoint, "teacher")
    leftovers = sorted(k for k in state if k.startswith(("teacher.", "student.")))
    kept = {key.removeprefix("vit."): tensor for key, tensor in state.items() if key not in leftovers}
    return kept, leftovers


def load_backbone(src: _Source, checkpoint: Any = None) -> tuple[nn.Module, DataConfig, list[str]]:
    """(backbone in eval mode, eval preprocessing, dropped training-only keys), loaded strictly.

    A checkpoint's teacher weights fill the architecture recorded in the run's `backbone/config.json` when
    there is one (exact constructor arguments), else the one its `plstitch train` config builds (as the
    trainer builds the teacher it exports), else the architecture inferred from the tensor shapes.
    `checkpoint` is the already loaded `src.checkpoint` (loaded here when None).
    """
    if src.checkpoint is None:
        model, data_config = load_timm_dir(src.backbone_dir)
        return model, data_config, []
    if checkpoint is None:
        checkpoint = load_checkpoint(src.checkpoint)
    state, leftovers = teacher_state(checkpoint)
    config = trainer_config(checkpoint)
    if src.backbone_dir is not None:
        timm_config = json.loads((src.backbone_dir / CONFIG_NAME).read_text(encoding="utf-8"))
        model = timm.create_model(
            timm_config["architecture"],
            pretrained=False,
            num_classes=timm_config.get("num_classes", 0),
            **timm_config["model_args"],
        )
        data_config = read_data_config(src.backbone_dir)
        convnext = timm_config["architecture"].startswith("convnext")
        top_level = CONVNEXT_TOP_LEVEL if convnext else VIT_TOP_LEVEL
    elif config is not None:  # an unfinished run: what `trainer.export_backbone` would have written
        model, data_config = build_vit(config, 0.0), DataConfig.for_size(config.img_size)
        top_level = VIT_TOP_LEVEL
    else:
        num_heads = find_num_heads(checkpoint)
        model, dropped = model_from_checkpoint(state, "teacher", num_heads, source=str(src.checkpoint))
        size = model.patch_embed.img_size[0] if hasattr(model, "patch_embed") else 224
        return model.eval(), DataConfig.for_size(size), sorted(dropped + leftovers)
    backbone, dropped = split_backbone(state, top_level)
    load_strict(model, backbone, str(src.checkpoint))
    return model.eval(), data_config, sorted(dropped + leftovers)


def write_temporal_head(src: _Source, checkpoint: Any, out_dir: Path) -> bool:
    """Put the temporal head into `out_dir`: the checkpoint's weights when it has them, else `backbone/`'s.

    Constructor arguments come from `backbone/temporal_head.json`, or for an unfinished run from its training
    config (attention heads, dropout) and the tensor shapes, as `load_temporal_head(last.ckpt)` reads them.
    Returns False when there is no head; warns when the checkpoint has one whose heads it does not record.
    """
    state = _temporal_head_tensors(checkpoint) if checkpoint is not None else {}
    source = f"{src.checkpoint} (temporal head)"
    settings = checkpoint.get("config") if isinstance(checkpoint, Mapping) else None
    settings = settings if isinstance(settings, Mapping) else {}
    if src.backbone_dir is not None and (src.backbone_dir / HEAD_CONFIG_FILE).is_file():
        head = load_temporal_head(src.backbone_dir)  # refuses weights that do not match the json
        if state:
            load_strict(head, state, source)
    elif state and isinstance(settings.get("temporal_heads"), int):
        dropout = float(settings.get("temporal_dropout", 0.1))
        head = temporal_head_from_state_dict(state, settings["temporal_heads"], dropout, source)
    else:
        if state:
            logger.warning(
                "%s has temporal-head weights but its config does not record `temporal_heads` (attention "
                "heads cannot be read from tensor shapes); exporting the backbone only.",
                src.checkpoint,
            )
        return False
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


def training_status(src: _Source, checkpoint: Any) -> RunProgress | None:
    """How far an unfinished run's checkpoint got; None for a finished run, a timm folder, a foreign file."""
    if src.run_dir is None or src.backbone_dir is not None or checkpoint is None:
        return None
    config = trainer_config(checkpoint)
    if config is None or not isinstance(checkpoint.get("step"), int):
        return None
    return run_progress(checkpoint, config)


def source_weights_sha256(src: _Source) -> str:
    """sha256 of the source file holding the exported weights unchanged: what `extract --model SOURCE` records
    (a run's or timm folder's `model.safetensors`; a checkpoint file, whose teacher is exported)."""
    return sha256_file(src.checkpoint if src.checkpoint is not None else src.backbone_dir / WEIGHTS_NAME)


def check_results(
    results: Sequence[dict[str, Any]],
    paths: Sequence[str | os.PathLike],
    weights_sha256: str,
    src: _Source,
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
    out_dir = Path(out_dir).expanduser()
    if out_dir.exists() and not options.overwrite:
        raise PublishError(f"{out_dir} already exists; choose another --out or pass --overwrite.")
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
        if not write_temporal_head(src, checkpoint, tmp) and not _temporal_head_tensors(checkpoint):
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
                "kind": _source_kind(src),
                "sha256": sha256_file(src.checkpoint) if src.checkpoint else None,
                "weights_sha256": source_sha256,
                "dropped_keys": dropped,
            },
            "training_status": _status_record(src, status),
            "data_config": data_config.to_dict(),
            "training_config": train_config,
            "data_summary": summary,
            "results": [
                _result_summary(r, p, m) for r, p, m in zip(results_data, results, matched, strict=True)
            ],
        }
        info = _card_info(tmp, out_dir.name, options, train_config, summary, results_data, meta)
        write_text_atomic(tmp / CARD_NAME, str(render_card(info)))
        meta["files"] = {p.name: sha256_file(p) for p in sorted(tmp.iterdir()) if p.is_file()}
        write_json_atomic(tmp / METADATA_NAME, meta)
        _replace_dir(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("Exported %s -> %s", src.path, out_dir)
    return out_dir


def _source_kind(src: _Source) -> str:
    """`run_dir` (finished or not), `checkpoint` (a file) or `timm_dir`."""
    if src.run_dir is not None and src.path.is_dir():
        return "run_dir"
    return "checkpoint" if src.checkpoint is not None else "timm_dir"


def _status_record(src: _Source, status: RunProgress | None) -> dict[str, Any] | None:
    """plstitch.json's `training_status`: a run checkpoint's progress, `finished` for a finished run."""
    if status is not None:
        return {**status.to_dict(), "checkpoint": str(src.checkpoint)}
    return {"finished": True} if src.backbone_dir is not None and src.run_dir is not None else None


def _result_summary(result: dict[str, Any], path: str | os.PathLike, matched: str) -> dict[str, Any]:
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
