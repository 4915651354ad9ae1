"""What training into a run folder does: start, resume, keep a finished run, refuse other settings, or replace
the run's own files (`--overwrite`); its log file and the result a run returns. Layout: `hub.run_folder`.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from plstitch_eval.errors import RunFolderError, TrainingError
from plstitch_eval.hub.run_folder import (
    CHECKPOINT_NAME,
    RUN_FILES,
    RUN_FOLDER_FILES,
    TENSORBOARD_EVENTS,
    TRAIN_CONFIG_NAME,
    checkpoint_path,
    is_finished,
    log_path,
    present_run_files,
    read_log,
    read_train_config,
    train_config_path,
)
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.io import write_json_atomic, write_text_atomic
from plstitch_eval.utils.outputs import check_output_path
from plstitch_train.config import ADDED_SETTINGS, TrainConfig, flat_settings
from plstitch_train.config.loss import objective_facts, objective_only_settings
from plstitch_train.run.checkpoint import load_training_checkpoint

PLANS = ("new", "resume", "finished", "overwrite")  # what `plan_run` decides
# settings that do not change what a run computes: a rerun may change them and still resume
RUNTIME_FIELDS = (
    "device",
    "num_workers",
    "checkpoint_every",
    "log_every",
    "cache_dir",
    "compile",
    "collapse_every",
    "stop_on_collapse",
    "eval_every",
    "eval_dataset",
    "eval_root",
    "eval_split",
    "eval_fps",
)
PATH_FIELDS = ("data", "root")  # compared as absolute paths


@dataclass
class TrainResult:
    """What a finished (or stopped) run leaves: its folder, the step reached and per-step mean losses."""

    out_dir: Path
    step: int
    total_steps: int
    history: list[dict[str, float]] = field(default_factory=list)
    already_finished: bool = False  # the folder held a finished run; nothing was trained or written


def comparable_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that change what a run computes, by flat name: runtime fields left out, data paths made
    absolute. `settings` is any saved form of a TrainConfig: nested sections or the old flat dict.

    Why: a rerun with other workers, device, cadence or cache folder is still the same run and may resume it;
    a run folder saved before the sections existed holds the flat form, and is the same run; so is one saved
    before a setting of ADDED_SETTINGS existed; an objective's own settings (`ObjectiveFacts.settings`: the
    permutation head's) matter to that objective only.
    """
    plain = json.loads(
        json.dumps(flat_settings(settings))
    )  # tuples -> lists, as train_config.json holds them
    out = {**ADDED_SETTINGS, **{key: value for key, value in plain.items() if key not in RUNTIME_FIELDS}}
    own = set(objective_facts(str(out.get("objective"))).settings)
    for key in objective_only_settings() - own:  # another objective's settings change nothing in this run
        out.pop(key, None)
    for key in PATH_FIELDS:
        if isinstance(out.get(key), str):
            out[key] = os.path.abspath(os.path.expanduser(out[key]))
    return out


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """`{key: (old value, new value)}` for each result-changing setting that differs between two configs.

    Why: one rule decides whether a rerun continues a run folder or is refused (see `comparable_settings`).
    Keys are flat setting names (`base_lr`), whichever form each side was saved in; keys of dict-valued
    settings are spelled `model_args.embed_dim`.
    """
    return _differences(comparable_settings(old), comparable_settings(new))


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """Differing keys of two dicts (new's order first), descending into values that are dicts on both sides.

    Why: `model_args.embed_dim 32 -> 48` says more than two cut-off dicts.
    """
    unset = "<unset>"
    out: dict[str, tuple[Any, Any]] = {}
    for key in list(new) + [key for key in old if key not in new]:
        before, after = old.get(key, unset), new.get(key, unset)
        if isinstance(before, dict) and isinstance(after, dict):
            out.update(_differences(before, after, f"{prefix}{key}."))
        elif before != after:
            out[f"{prefix}{key}"] = (before, after)
    return out


def describe_differences(diff: dict[str, tuple[Any, Any]], limit: int = 6) -> str:
    """`base_lr 0.0004 -> 0.001, epochs 100 -> 4` (the first `limit` keys, then how many more)."""
    parts = [f"{key} {_short(old)} -> {_short(new)}" for key, (old, new) in list(diff.items())[:limit]]
    if len(diff) > limit:
        parts.append(f"and {len(diff) - limit} more")
    return ", ".join(parts)


def _short(value: Any, width: int = 40) -> str:
    """A JSON value cut to `width` characters, so a refusal stays one line."""
    text = json.dumps(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def recorded_settings(run_dir: Path) -> dict[str, Any] | None:
    """The settings a run folder was made with: its train_config.json, else its last.ckpt's, else None."""
    try:
        settings = read_train_config(run_dir)
    except RunFolderError as exc:
        raise TrainingError(f"{exc} Choose another --out, or --overwrite to replace that run.") from exc
    if settings is not None:
        return settings
    if checkpoint_path(run_dir).is_file():
        return load_training_checkpoint(run_dir)["config"]
    return None


def plan_run(config: TrainConfig, run_dir: Path, overwrite: bool = False) -> str:
    """What training `config` into `run_dir` does: one of PLANS ("new", "resume", "finished", "overwrite").

    Why: rerunning a command must continue (or keep) its run, never restart over it silently; a run made with
    other settings is refused naming them. It only reads, so every torchrun rank decides alike; a launch
    decides once (`launch.plan_launch`) and hands the decision to `trainer.train(plan=...)`.
    """
    check_output_path(run_dir, "--out")  # not under a regular file: one line before anything is built
    present = present_run_files(run_dir)
    if not present:
        return "new"
    if overwrite:
        RUN_FOLDER_FILES.check(run_dir)  # a folder holding a user's files is refused, nothing deleted
        return "overwrite"
    recorded = recorded_settings(run_dir)
    if recorded is None:
        raise TrainingError(
            f"{run_dir} holds {', '.join(present)} but neither {TRAIN_CONFIG_NAME} nor {CHECKPOINT_NAME}, so "
            "it is no run to continue; choose another --out, or --overwrite to replace those files."
        )
    diff = config_differences(recorded, config.to_dict())
    if diff:
        raise TrainingError(
            f"{run_dir} holds a run with other settings ({describe_differences(diff)}, as old -> new): "
            f"continue it with `--resume {shlex.quote(str(run_dir))}` (its saved settings), or start it "
            "again with --overwrite (deletes its checkpoint, log and backbone)."
        )
    if is_finished(run_dir):
        return "finished"
    return "resume" if checkpoint_path(run_dir).is_file() else "new"


def remove_run_files(run_dir: Path) -> None:
    """Delete the trainer's own files in `run_dir` (backbone first), their temp files and its TensorBoard
    event files; nothing else.

    Why: --overwrite must never delete what is not ours; the frame cache stays (keyed by source and settings).
    """
    for name in RUN_FILES:
        for path in [run_dir / name, *run_dir.glob(f".{name}.*.tmp")]:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
    for path in run_dir.glob(TENSORBOARD_EVENTS):
        if path.is_file() and not path.is_symlink():
            path.unlink()


def resume_target(resume: str | os.PathLike, out_dir: str | os.PathLike | None) -> Path:
    """The folder an explicit `--resume` writes to: the checkpoint's own, or an `--out` without a run."""
    source = Path(resume)
    source_dir = source if source.is_dir() else source.parent
    if out_dir is None:
        return source_dir
    target = Path(out_dir)
    if target.resolve() != source_dir.resolve() and present_run_files(target):
        raise TrainingError(
            f"--out {target} already holds a run; resume {source_dir} in place or give an empty --out."
        )
    return target


def finished_result(run_dir: Path) -> TrainResult:
    """A finished run's result, read back from its log (last record) or checkpoint; writes nothing."""
    records = read_log(run_dir)
    step = int(records[-1]["step"]) if records else _checkpoint_step(run_dir)
    logger.debug("%s already finished (step %d); nothing to do.", run_dir, step)
    return TrainResult(run_dir, step, step, records[-1:], already_finished=True)


def _checkpoint_step(run_dir: Path) -> int:
    """The step of `run_dir/last.ckpt` (memory-mapped: a large checkpoint is not read), or 0 without one."""
    path = checkpoint_path(run_dir)
    if not path.is_file():
        return 0
    return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["step"])


def prepare_folder(out_dir: Path, config: TrainConfig, replace: bool, step: int) -> None:
    """Rank 0, once the new run is built: drop an overwritten run's files, record the config (nested form),
    cut the log.

    Why: nothing of an old run is deleted before the new settings proved they build a run.
    """
    if replace:
        remove_run_files(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(train_config_path(out_dir), config.to_dict())
    _truncate_log(log_path(out_dir), step)


def _truncate_log(path: Path, step: int) -> None:
    """Drop log records after `step` (written by a run killed after its last checkpoint)."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
    if len(kept) != len(lines):
        write_text_atomic(path, "".join(line + "\n" for line in kept))


def append_log(path: Path, record: dict[str, float]) -> None:
    """Append `record` to the log at `path` as one JSON line (`log.RunLog` adds TensorBoard)."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")
