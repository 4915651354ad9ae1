"""What a training request does with its run folder: start, resume, keep a finished run, or replace one.

Why: the rules (--resume or settings, never both with --overwrite; --out needed without --resume; a rerun
resumes, keeps a finished run or is refused) belong to the trainer package, so the `train` command only parses
arguments and every entry point (`plstitch train`, torchrun, the Python API) decides alike.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.errors import ConfigError
from plstitch_eval.utils.console import logger
from plstitch_train.config import TrainConfig, setting_name
from plstitch_train.data import with_data_fps
from plstitch_train.presets import get_preset
from plstitch_train.run import plan
from plstitch_train.trainer import RUNTIME_FIELDS, TrainResult, train

ACTIONS = plan.PLANS  # "new", "resume", "finished", "overwrite"


@dataclass(frozen=True)
class Launch:
    """The decision: `action` (one of ACTIONS) on `out_dir`, training `config` or continuing `resume`.

    With `resume` the checkpoint's settings win: `config` is None and `runtime` holds the RUNTIME_FIELDS the
    request changes; `out_dir` None means the checkpoint's own folder.
    """

    action: str
    out_dir: Path | None
    config: TrainConfig | None = None
    resume: Path | None = None
    runtime: dict[str, Any] = field(default_factory=dict)


def base_config(preset: str, config_file: Path | None = None) -> TrainConfig:
    """The settings a request starts from: `config_file` (a train_config.json) when given, else `preset`."""
    if config_file is None:
        return get_preset(preset)
    try:
        return TrainConfig.from_dict(json.loads(Path(config_file).read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"--config {config_file}: cannot read a training config: {exc}") from exc


def plan_launch(
    config: TrainConfig,
    out: str | os.PathLike | None,
    *,
    resume: str | os.PathLike | None = None,
    overwrite: bool = False,
    given: Collection[str] = (),
) -> Launch:
    """Decide what training `config` into `out` (or continuing `resume`) does; reads files, writes none.

    `given` names the TrainConfig settings the user set (flat or `section.name`): with `resume` only its
    RUNTIME_FIELDS apply, the others are named in a warning; without "fps" in it a frames LMDB as `--data`
    trains at its own frame rate (`data.with_data_fps`). Conflicting or missing options raise ConfigError; a
    folder holding a run with other settings raises TrainingError naming `--resume` and `--overwrite`
    (`run.plan.plan_run`, asked once here: `run_launch` hands its decision to the trainer).
    """
    if resume is not None and overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces it: give one of them.")
    given = [setting_name(name) if "." in name else name for name in given]
    if resume is not None:
        ignored = sorted(name for name in given if name not in RUNTIME_FIELDS)
        if ignored and int(os.environ.get("RANK", "0")) == 0:
            logger.warning("Resuming: %s ignored; the checkpoint's settings are used.", ", ".join(ignored))
        runtime = {name: getattr(config, name) for name in RUNTIME_FIELDS if name in given}
        return Launch("resume", None if out is None else Path(out), resume=Path(resume), runtime=runtime)
    if out is None:
        raise ConfigError("--out is required (the run folder), unless --resume is given.")
    config = with_data_fps(config.validate(), fps_given="fps" in given)
    return Launch(plan.plan_run(config, Path(out), overwrite), Path(out), config)


def run_launch(launch: Launch) -> TrainResult:
    """Carry out `launch` with `trainer.train`, which takes its decision as it is (a finished run returns at
    once with `already_finished`)."""
    if launch.resume is not None:
        return train(out_dir=launch.out_dir, resume=launch.resume, runtime=launch.runtime)
    return train(launch.config, launch.out_dir, plan=launch.action)
