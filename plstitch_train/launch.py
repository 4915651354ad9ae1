"""What a training request does with its run folder: start, resume, keep a finished run, or replace one.

Why: the rules (--resume or settings, never both with --overwrite; --out needed without --resume; a rerun
resumes, keeps a finished run or is refused) belong to the trainer package, so the `train` command only parses
arguments and every entry point (`plstitch train`, torchrun, the Python API) decides alike. What a command
line asks for is a `TrainRequest` (its flags' settings, `--set` items, preset or config file, run folder);
`train_session` carries it out and returns the exit code (0, 130/143 when stopped, 3 on collapse).
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from plstitch_eval.data.decoders import check_decoder_options
from plstitch_eval.errors import ConfigError
from plstitch_eval.hub.run_folder import RUN_FOLDER_FILES, backbone_dir, present_run_files
from plstitch_eval.utils.console import console, logger, print_error
from plstitch_train.config import LOSS_KEYS, TrainConfig, setting_name
from plstitch_train.data import with_data_fps
from plstitch_train.monitors.collapse import CollapseStop
from plstitch_train.monitors.knn import read_knn_best
from plstitch_train.presets import get_preset
from plstitch_train.run import plan
from plstitch_train.trainer import RUNTIME_FIELDS, TrainingInterrupted, TrainResult, train

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
    trains at its own frame rate (`data.with_data_fps`). Conflicting or missing options raise ConfigError, and
    so does an `out` holding no run but a user's files (`check_run_folder`); a folder holding a run with other
    settings raises TrainingError naming `--resume` and `--overwrite` (`run.plan.plan_run`, asked once here:
    `run_launch` hands its decision to the trainer).
    """
    if resume is not None and overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces it: give one of them.")
    given = [setting_name(name) if "." in name else name for name in given]
    if resume is not None:
        ignored = sorted(name for name in given if name not in RUNTIME_FIELDS)
        if ignored and int(os.environ.get("RANK", "0")) == 0:
            logger.warning("Resuming: %s ignored; the checkpoint's settings are used.", ", ".join(ignored))
        runtime = {name: getattr(config, name) for name in RUNTIME_FIELDS if name in given}
        if out is not None:
            check_run_folder(Path(out))
        return Launch("resume", None if out is None else Path(out), resume=Path(resume), runtime=runtime)
    if out is None:
        raise ConfigError("--out is required (the run folder), unless --resume is given.")
    config = with_data_fps(config.validate(), fps_given="fps" in given)
    check_run_folder(Path(out))  # settings first (they name no folder); then nothing beside a user's files
    return Launch(plan.plan_run(config, Path(out), overwrite), Path(out), config)


def check_run_folder(out: Path) -> None:
    """Refuse, in one line naming the first, an `out` that holds no run but entries the trainer does not
    write (`RUN_FOLDER_FILES`; `.` included), with or without `--overwrite`.

    Why: a run starts in a new or empty folder or one of its own (a frame cache of a run stopped early), never
    beside a user's files; a folder holding a run is `run.plan.plan_run`'s to decide (resume, refuse other
    settings, `--overwrite` replacing only the run's own files).
    """
    if not present_run_files(out):
        RUN_FOLDER_FILES.check(out, "--out", overwrite=False)


def run_launch(launch: Launch) -> TrainResult:
    """Carry out `launch` with `trainer.train`, which takes its decision as it is (a finished run returns at
    once with `already_finished`)."""
    if launch.resume is not None:
        return train(out_dir=launch.out_dir, resume=launch.resume, runtime=launch.runtime)
    return train(launch.config, launch.out_dir, plan=launch.action)


@dataclass
class TrainRequest:
    """What a `plstitch train` command line asks for: the settings its flags give (flat names; None, or False
    for a switch left off: not given), `--set NAME=VALUE` items, where the settings start (`preset`, or
    `config_file`: a train_config.json) and the run folder (`out`, `resume`, `overwrite`)."""

    settings: dict[str, Any] = field(default_factory=dict)
    set_values: list[str] = field(default_factory=list)
    preset: str = "paper-vitb16"
    config_file: Path | None = None
    out: Path | None = None
    resume: Path | None = None
    overwrite: bool = False

    def given(self) -> dict[str, Any]:
        """The flags' settings that were given, paths as text; a `--context-seconds` range missing an end is
        not given."""
        given: dict[str, Any] = {}
        for name, value in self.settings.items():
            if name == "context_seconds" and value is not None and None in value:
                value = None
            if value is not None and value is not False:
                given[name] = str(value) if isinstance(value, Path) else value
        return given

    def config(self) -> tuple[TrainConfig, list[str]]:
        """The training config (the preset or config file, then `--set`, then the flags) and the names of the
        settings given, for `plan_launch`; a setting given twice is refused."""
        flags = self.given()
        overrides = set_overrides(self.set_values, list(flags))
        config = base_config(self.preset, self.config_file).with_changes(**overrides).replace(**flags)
        return config, [*flags, *overrides]

    def launch(self) -> Launch:
        """The decision this request makes (`plan_launch`), a decoder that cannot load refused first."""
        decoder = self.settings.get("decoder")
        if decoder is not None:
            check_decoder_options(decoder)  # a missing TorchCodec is one line before anything starts
        config, given = self.config()
        return plan_launch(config, self.out, resume=self.resume, overwrite=self.overwrite, given=given)


def set_overrides(items: list[str], flags: list[str]) -> dict[str, object]:
    """`--set NAME=VALUE` items as {flat name: value} (VALUE read as JSON when it parses, else as text); a
    setting given twice, by two items or by an item and a flag in `flags`, is refused."""
    out: dict[str, object] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected NAME=VALUE, e.g. --set optim.base_lr=0.001.")
        name = setting_name(key.strip())
        if name in out or name in flags:
            raise ConfigError(f"--set {item!r}: {name} is given twice; give each setting once.")
        try:
            out[name] = json.loads(text)
        except json.JSONDecodeError:
            out[name] = text
    return out


def train_session(request: TrainRequest) -> int:
    """Decide and run `request`; print how a stopped run resumes, or the summary; the exit code: 0, 128 + the
    signal that stopped it (130, 143; its checkpoint saved), or 3 when `--stop-on-collapse` stopped it."""
    launch = request.launch()
    try:
        result = run_launch(launch)
    except TrainingInterrupted as stop:
        if is_rank_zero():
            print_error(stop.message(), label="interrupted", style="yellow")
        return stop.exit_code
    except CollapseStop as stop:
        if is_rank_zero():
            print_error(stop.message(), label="collapsed", style="yellow")
        return stop.exit_code
    print_summary(result)
    return 0


def print_summary(result: TrainResult) -> None:
    """Rank 0: a finished run's one-line notice on stderr; the JSON summary on stdout (out_dir, steps, the
    last logged losses, and the best k-NN accuracy when one was recorded - never used to choose weights)."""
    if not is_rank_zero():
        return
    if result.already_finished:
        console.print(
            f"{result.out_dir} already finished ({result.step} steps; backbone in "
            f"{backbone_dir(result.out_dir)}): nothing to do. Use --overwrite to train it again.",
            highlight=False,
            soft_wrap=True,
        )
    last = result.history[-1] if result.history else {}
    summary: dict[str, Any] = {
        "out_dir": str(result.out_dir),
        "step": result.step,
        "total_steps": result.total_steps,
    }
    summary["final"] = {k: v for k, v in last.items() if k in LOSS_KEYS}
    summary["already_finished"] = result.already_finished
    knn_best = read_knn_best(result.out_dir)
    if knn_best is not None:  # recorded, not used to choose weights (knn_eval.json)
        summary["knn_best"] = knn_best
    print(json.dumps(summary), flush=True)


def is_rank_zero() -> bool:
    """Whether this process prints (under torchrun every rank runs the command)."""
    return int(os.environ.get("RANK", "0")) == 0
