"""PL-Stitch training loop: AdamW + cosine schedules, AMP, DDP (torchrun), accumulation, exact resume, export.

Run directory (layout: `plstitch_eval.hub.run_folder`): `last.ckpt` (everything an exact resume needs;
loads with `torch.load(weights_only=True)`), `backbone/` (teacher ViT in timm format + temporal head;
`load_encoder(run_dir)` reads it; written last and atomically, so its presence means "finished"),
`train_config.json` and `log.jsonl` (one JSON object per logged step), `frame_cache/` (decoded frames unless
`cache_dir` is set). Only rank 0 writes files. Training into a folder that holds a run resumes it (same
settings), does nothing (finished) or is refused (other settings); `overwrite=True` replaces it.
SIGINT/SIGTERM stop at a step boundary with a checkpoint (docs/training.md).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shlex
import shutil
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from rich.progress import TextColumn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from plstitch_eval.errors import ConfigError, RunFolderError, TrainingError
from plstitch_eval.hub.run_folder import (
    CHECKPOINT_NAME,
    FRAME_CACHE_DIR,
    LOG_NAME,
    RUN_FILES,
    TRAIN_CONFIG_NAME,
    backbone_dir,
    checkpoint_path,
    is_finished,
    present_run_files,
    read_log,
    read_train_config,
)
from plstitch_eval.utils.console import console, logger, progress_bar
from plstitch_eval.utils.device import autocast, resolve_device, resolve_precision
from plstitch_eval.utils.distributed import DistInfo, init_distributed, teardown_distributed
from plstitch_eval.utils.io import atomic_path, temp_dir_beside, write_json_atomic, write_text_atomic
from plstitch_train.data import (
    FrameStore,
    TrainDataset,
    build_training_data,
    micro_batch_size,
    open_frame_store,
)
from plstitch_train.frames_lmdb import LmdbFrameStore
from plstitch_train.model import PLStitchModel
from plstitch_train.presets import TrainConfig
from plstitch_train.sampling import TrainSampler
from plstitch_train.schedules import Schedules, ramp_weight

CHECKPOINT_FORMAT = 1
# settings that do not change what a run computes: a rerun may change them and still resume
RUNTIME_FIELDS = ("device", "num_workers", "checkpoint_every", "log_every", "cache_dir")
PATH_FIELDS = ("data", "root")  # compared as absolute paths
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
DUPLICATE_SIGNAL_S = 1.0  # under torchrun one Ctrl-C arrives twice (terminal + agent): count it once
LOSS_KEYS = ("loss", "vid", "mim", "jigsaw")


@dataclass
class TrainResult:
    """What a finished (or stopped) run leaves: its folder, the step reached and per-step mean losses."""

    out_dir: Path
    step: int
    total_steps: int
    history: list[dict[str, float]] = field(default_factory=list)
    already_finished: bool = False  # the folder held a finished run; nothing was trained or written


# --- RNG state (plain tensors / numbers so torch.load(weights_only=True) reads it) --------------------------


def capture_rng(device: torch.device) -> dict[str, Any]:
    """torch, numpy, python (and CUDA) global RNG states as tensors, ints and floats."""
    _, keys, pos, has_gauss, cached = np.random.get_state()
    version, py_state, gauss = random.getstate()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "python": {
            "version": int(version),
            "state": torch.tensor(py_state, dtype=torch.int64),
            "gauss": gauss,
        },
    }
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def restore_rng(state: dict[str, Any], device: torch.device) -> None:
    """Inverse of `capture_rng`."""
    torch.set_rng_state(state["torch"])
    np_state = state["numpy"]
    np.random.set_state(
        (
            "MT19937",
            np_state["keys"].numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gaussian"],
        )
    )
    py = state["python"]
    random.setstate((py["version"], tuple(int(v) for v in py["state"].tolist()), py["gauss"]))
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"], device)


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


# --- building the pieces ------------------------------------------------------------------------------------


def load_training_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """A run folder's (or file's) training checkpoint, read `weights_only`; TrainingError if it is not ours.

    Unlike `plstitch_eval.hub.safe_load.load_checkpoint` (any checkpoint file) it checks the trainer's format.
    Every refusal is one line: the file, what it holds instead, what a training checkpoint is.
    """
    path = checkpoint_path(path)
    if not path.is_file():
        raise TrainingError(
            f"Cannot resume: {path} does not exist; pass a run folder or its {CHECKPOINT_NAME}."
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means "not our checkpoint"
        raise TrainingError(_not_a_checkpoint(path, _unreadable_reason(path, exc))) from exc
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise TrainingError(_not_a_checkpoint(path, _foreign_content(checkpoint)))
    return checkpoint


def _not_a_checkpoint(path: Path, reason: str) -> str:
    """The one-line refusal of `path`: why, what a training checkpoint is, and how to use weights instead."""
    return (
        f"Cannot read {path} as a training checkpoint: {reason}. A training checkpoint is a run's "
        f"{CHECKPOINT_NAME} (written by `plstitch train --out RUN`): pass a run folder or its "
        f"{CHECKPOINT_NAME}; to start from a model's weights, use --init FILE."
    )


def _unreadable_reason(path: Path, exc: BaseException) -> str:
    """Why `torch.load(weights_only=True)` could not read `path`, in words (never the loader's own essay)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(4)
    except OSError as error:
        return f"it cannot be opened ({error.strerror or error})"
    if not head:
        return "the file is empty"
    if not head.startswith((b"PK", b"\x80")):  # torch.save writes a zip archive (or, legacy, a pickle)
        return "it is not a file written by torch.save (text or other data)"
    if "Weights only load failed" in str(exc):
        return "it holds Python objects besides tensors and plain values, which no plstitch checkpoint does"
    first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"it is damaged or cut off ({_short_text(first_line)})"


def _foreign_content(content: object) -> str:
    """What a readable file that is no training checkpoint of ours holds, e.g. "model weights (keys ...)"."""
    if not isinstance(content, dict):
        return f"it holds a {type(content).__name__}, not a checkpoint dict"
    if "format" in content:
        return f"it has checkpoint format {_short(content['format'])}; this version reads {CHECKPOINT_FORMAT}"
    keys = ", ".join(str(key) for key in list(content)[:4]) + (", ..." if len(content) > 4 else "")
    return f"it holds model weights or other data (keys: {_short_text(keys, 60)}) but no training state"


def _short_text(text: str, width: int = 80) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _frame_store(config: TrainConfig, out_dir: Path, info: DistInfo) -> FrameStore | LmdbFrameStore:
    """Decode the training videos (rank 0 first, so the others only read the cache)."""
    cache_dir = Path(config.cache_dir) if config.cache_dir else out_dir / FRAME_CACHE_DIR

    def build() -> FrameStore | LmdbFrameStore:
        return open_frame_store(config, cache_dir)

    if info.world_size == 1:
        return build()
    store = build() if info.is_main else None
    dist.barrier()
    return store if store is not None else build()


def _loader(
    dataset: TrainDataset, sampler: TrainSampler, config: TrainConfig, device: torch.device
) -> DataLoader:
    """DataLoader with its own generator, so creating it never consumes the global RNG (exact resume)."""
    generator = torch.Generator().manual_seed(config.seed)
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=config.num_workers,
        pin_memory=device.type == "cuda",
        generator=generator,
        worker_init_fn=_ignore_stop_signals if config.num_workers > 0 else None,
    )


def _ignore_stop_signals(worker_id: int) -> None:
    """DataLoader workers ignore SIGINT/SIGTERM; the main process stops them after its checkpoint.

    Why: a terminal's Ctrl-C reaches the whole process group, and a worker dying mid-epoch fails the step.
    """
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)


class _LiveLine:
    """Rich progress bar on stderr (rank 0) with per-branch losses, lr, samples/s and ETA.

    When stderr is not a terminal (a log file, CI) the same line is logged after the first step (the run has
    started) and then every `log_every` steps instead.
    """

    def __init__(self, total: int, start: int, enabled: bool, log_every: int) -> None:
        self.enabled, self.total, self.log_every = enabled, total, log_every
        self.interactive = enabled and console.is_terminal
        self.progress = progress_bar(TextColumn("{task.fields[info]}"), disable=not self.interactive)
        self.task = self.progress.add_task("train", total=total, completed=start, info="")
        self.started = time.perf_counter()
        self.start_step = start

    def __enter__(self) -> _LiveLine:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def update(self, step: int, record: dict[str, float]) -> None:
        parts = [f"{k} {record[k]:.4f}" for k in LOSS_KEYS if k in record]
        parts += [f"lr {record['lr']:.2e}", f"{record['samples_per_s']:.1f} samples/s"]
        if self.interactive:
            self.progress.update(self.task, completed=step, info="  ".join(parts))
        elif self.enabled and (step % self.log_every == 0 or step in (self.start_step + 1, self.total)):
            per_step = (time.perf_counter() - self.started) / max(step - self.start_step, 1)
            eta = per_step * (self.total - step)
            logger.info("step %d/%d  %s  ETA %.0fs", step, self.total, "  ".join(parts), eta)


# --- the run folder: resume, finished, refused or overwritten -----------------------------------------------


def comparable_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that change what a run computes: runtime fields left out, data paths made absolute.

    Why: a rerun with other workers, device, cadence or cache folder is still the same run and may resume it.
    """
    plain = json.loads(json.dumps(settings))  # tuples -> lists, as train_config.json holds them
    out = {key: value for key, value in plain.items() if key not in RUNTIME_FIELDS}
    for key in PATH_FIELDS:
        if isinstance(out.get(key), str):
            out[key] = os.path.abspath(os.path.expanduser(out[key]))
    return out


def config_differences(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """`{key: (old value, new value)}` for each result-changing setting that differs between two configs.

    Why: one rule decides whether a rerun continues a run folder or is refused (see `comparable_settings`).
    Keys of dict-valued settings are spelled `model_args.embed_dim`.
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


def _describe_differences(diff: dict[str, tuple[Any, Any]], limit: int = 6) -> str:
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
    """What training `config` into `run_dir` does: "new", "resume", "finished" or "overwrite".

    Why: rerunning a command must continue (or keep) its run, never restart over it silently; a run made with
    other settings is refused naming them. It only reads, so every torchrun rank decides alike.
    """
    present = present_run_files(run_dir)
    if not present:
        return "new"
    if overwrite:
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
            f"{run_dir} holds a run with other settings ({_describe_differences(diff)}, as old -> new): "
            f"continue it with `--resume {shlex.quote(str(run_dir))}` (its saved settings), or start it "
            "again with --overwrite (deletes its checkpoint, log and backbone)."
        )
    if is_finished(run_dir):
        return "finished"
    return "resume" if checkpoint_path(run_dir).is_file() else "new"


def remove_run_files(run_dir: Path) -> None:
    """Delete the trainer's own files in `run_dir` (backbone first) and their temp files; nothing else.

    Why: --overwrite must never delete what is not ours; the frame cache stays (keyed by source and settings).
    """
    for name in RUN_FILES:
        for path in [run_dir / name, *run_dir.glob(f".{name}.*.tmp")]:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()


def _resume_target(resume: str | os.PathLike, out_dir: str | os.PathLike | None) -> Path:
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


def _finished_result(run_dir: Path) -> TrainResult:
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


def _prepare_folder(out_dir: Path, config: TrainConfig, replace: bool, step: int) -> None:
    """Rank 0, once the new run is built: drop an overwritten run's files, record the config, cut the log.

    Why: nothing of an old run is deleted before the new settings proved they build a run.
    """
    if replace:
        remove_run_files(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_dir / TRAIN_CONFIG_NAME, config.to_dict())
    _truncate_log(out_dir / LOG_NAME, step)


# --- SIGINT / SIGTERM ---------------------------------------------------------------------------------------


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by SIGINT/SIGTERM; `message()` names the checkpoint and the command that resumes.

    A KeyboardInterrupt, so `except Exception` never swallows it; `exit_code` is 128 + signal (130, 143).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.run_dir: Path | None = None
        self.saved_step: int | None = None
        self.total_steps: int | None = None
        self.resume_command = ""

    @property
    def exit_code(self) -> int:
        """The shell's code for death by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum

    def message(self) -> str:
        """One or two lines for stderr: where the last checkpoint is and how to continue."""
        name = signal.Signals(self.signum).name
        if self.saved_step is None:
            return f"stopped by {name} before a first checkpoint in {self.run_dir}; rerun the same command."
        of_total = f" of {self.total_steps}" if self.total_steps else ""
        return (
            f"stopped by {name}; {self.run_dir / CHECKPOINT_NAME} holds step {self.saved_step}{of_total}."
            f"\nresume with: {self.resume_command}  (or rerun the same command)"
        )


def resume_command(run_dir: Path, info: DistInfo) -> str:
    """The shell command that resumes `run_dir`: `plstitch train --resume RUN`, or its torchrun launch."""
    target = shlex.quote(str(run_dir))
    if info.world_size == 1:
        return f"plstitch train --resume {target}"
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE", info.world_size))
    command = f"torchrun --nproc_per_node {per_node} -m plstitch_eval train --resume {target}"
    if per_node != info.world_size:
        command += " (on every node, with your --nnodes/--rdzv-* options)"
    return command


class StopSignals:
    """SIGINT/SIGTERM in training: the first asks to stop at the next step boundary, a second stops at once.

    Why: a stop between steps leaves a checkpoint that resumes exactly; before the step loop (decoding,
    building) there is nothing to save, so a signal stops at once there. Installed only in the main thread.
    """

    def __init__(self, announce: bool = False, duplicate_s: float = 0.0) -> None:
        self.announce, self.duplicate_s = announce, duplicate_s
        self.graceful = False  # True while the step loop can stop at a boundary
        self.requested: int | None = None  # the signal that asked to stop
        self.saved_step: int | None = None  # the step of the newest checkpoint on disk
        self.total_steps: int | None = None
        self._received_at = 0.0
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {signum: signal.signal(signum, self.handle) for signum in STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def handle(self, signum: int, frame: object = None) -> None:
        """Signal handler: record the request (first, in the loop) or raise TrainingInterrupted."""
        now = time.monotonic()
        if self.requested is not None and now - self._received_at < self.duplicate_s:
            return  # one Ctrl-C delivered twice under torchrun (terminal and agent)
        immediate = not self.graceful or self.requested is not None
        self.requested, self._received_at = signum, now
        if immediate:
            raise TrainingInterrupted(signum)
        if self.announce:
            os.write(2, b"\nstopping after this step to save a checkpoint (Ctrl-C again stops at once)\n")


def _agreed_stop(requested: int | None, info: DistInfo, device: torch.device) -> int | None:
    """The stop signal any rank received (max over ranks), so that every rank stops after the same step."""
    if info.world_size == 1:
        return requested
    flag = torch.tensor([requested or 0], dtype=torch.int64, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return int(flag.item()) or None


def _stderr_is_terminal() -> bool:
    """Whether a person watches stderr (then the first Ctrl-C is acknowledged at once)."""
    try:
        return os.isatty(2)
    except OSError:
        return False


# --- the loop -----------------------------------------------------------------------------------------------


def train(
    config: TrainConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    resume: str | os.PathLike | None = None,
    overwrite: bool = False,
    runtime: dict[str, Any] | None = None,
    stop_after: int | None = None,
) -> TrainResult:
    """Train a PL-Stitch model into `out_dir`, continuing the run already there; returns the per-step losses.

    A folder holding a run of the same settings (`config_differences`) resumes from its last.ckpt, or, when
    finished, returns at once with `already_finished` and writes nothing; other settings raise TrainingError
    unless `overwrite` (the old run's files go only once the new run is built). `resume` restores from a
    checkpoint whose config wins (`runtime` may change only RUNTIME_FIELDS). `stop_after` stops after that
    many optimizer steps as a kill would, leaving a checkpoint but no export (tests of exact resume).
    SIGINT/SIGTERM raise `TrainingInterrupted` after checkpointing at the next step boundary.
    """
    if resume is not None and overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces it: give one of them.")
    checkpoint = None
    if resume is not None:
        out_dir = _resume_target(resume, out_dir)
        if is_finished(out_dir):
            return _finished_result(out_dir)
        checkpoint = load_training_checkpoint(resume)
        config = TrainConfig.from_dict(checkpoint["config"])
    if config is None or out_dir is None:
        raise TrainingError("train() needs a config and an output folder, or a checkpoint to resume.")
    config = config.replace(**{k: v for k, v in (runtime or {}).items() if k in RUNTIME_FIELDS})
    config.validate()
    out_dir = Path(out_dir)
    plan = "resume" if checkpoint is not None else plan_run(config, out_dir, overwrite)
    if plan == "finished":
        return _finished_result(out_dir)
    if plan == "resume" and checkpoint is None:
        checkpoint = load_training_checkpoint(out_dir)
        if int(os.environ.get("RANK", "0")) == 0:
            logger.info("Resuming %s from step %d.", out_dir, int(checkpoint["step"]))
    device = resolve_device(config.device)
    info, device = init_distributed(device)  # a rendezvous: no rank writes before every rank has planned
    precision = resolve_precision(config.precision, device)
    stops = StopSignals(
        announce=info.is_main and _stderr_is_terminal(),
        duplicate_s=DUPLICATE_SIGNAL_S if info.world_size > 1 else 0.0,
    )
    stops.saved_step = None if checkpoint is None else int(checkpoint["step"])
    try:
        with stops:
            run = _RunSetup(config, out_dir, checkpoint, plan == "overwrite", stop_after, stops)
            return _run(run, device, precision, info)
    except TrainingInterrupted as stop:
        stop.run_dir, stop.saved_step, stop.total_steps = out_dir, stops.saved_step, stops.total_steps
        stop.resume_command = resume_command(out_dir, info)
        raise
    finally:
        teardown_distributed(info)


@dataclass
class _RunSetup:
    """What `_run` trains: the config, the folder, a checkpoint to restore, whether to replace an old run."""

    config: TrainConfig
    out_dir: Path
    checkpoint: dict[str, Any] | None
    replace: bool
    stop_after: int | None
    stops: StopSignals


def _run(run: _RunSetup, device: torch.device, precision: str, info: DistInfo) -> TrainResult:
    """Build the data, model and optimizer of `run`, restore its checkpoint, train, checkpoint and export."""
    config, out_dir, checkpoint, stops = run.config, run.out_dir, run.checkpoint, run.stops
    micro_batch_size(config, info.world_size)  # a bad batch split fails before any video is decoded
    store = _frame_store(config, out_dir, info)

    seed_everything(config.seed)  # identical initial weights on every rank
    model = PLStitchModel(config).to(device)
    dataset, sampler = build_training_data(
        config, store, model.student["backbone"].grid_size, rank=info.rank, world_size=info.world_size
    )
    steps_per_epoch = sampler.batches_per_epoch // config.accum_steps
    if steps_per_epoch < 1:
        raise TrainingError(
            f"An epoch holds {sampler.batches_per_epoch} micro-batches, fewer than accum_steps."
        )
    total_steps = config.epochs * steps_per_epoch
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    schedules = Schedules(
        total_steps,
        steps_per_epoch,
        base_lr=config.base_lr,
        min_lr=config.min_lr,
        warmup_epochs=config.warmup_epochs,
        weight_decay=config.weight_decay,
        weight_decay_end=config.weight_decay_end,
        momentum_teacher=config.momentum_teacher,
        batch_size=config.batch_size,
    )
    optimizer = torch.optim.AdamW(model.param_groups(), lr=0.0)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")

    step = 0 if checkpoint is None else int(checkpoint["step"])
    if info.is_main:  # the new run is built: only now may an old one's files go
        _prepare_folder(out_dir, config, run.replace, step)
        _announce(config, step, total_steps, steps_per_epoch, device, out_dir)
    seed_everything(config.seed + 1 + info.rank)  # drop path / dropout differ per rank
    if checkpoint is not None:
        step = _restore(checkpoint, model, optimizer, scaler, sampler, info, device)

    ddp = None
    if info.world_size > 1:
        find_unused = config.lambda_jigsaw > 0 and config.jigsaw_start_epoch > 0
        ddp = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            broadcast_buffers=False,
            find_unused_parameters=find_unused,
        )
    state = _LoopState(config, model, ddp, optimizer, scaler, schedules, device, precision, info)
    history: list[dict[str, float]] = []
    clipped = model.clipped_parameters()  # backbone + iBOT head; the ranking heads are not clipped
    log_path = out_dir / LOG_NAME
    model.train()
    start_time = time.perf_counter()
    live_enabled = info.is_main and not os.environ.get("PLSTITCH_NO_LIVE")
    stops.graceful, stops.total_steps = True, total_steps
    with _LiveLine(total_steps, step, live_enabled, config.log_every) as live:
        while step < total_steps:
            epoch, step_in_epoch = divmod(step, steps_per_epoch)
            sampler.set_position(epoch, step_in_epoch * config.accum_steps)
            batches = iter(_loader(dataset, sampler, config, device))
            while step_in_epoch < steps_per_epoch and step < total_steps:
                tick = time.perf_counter()
                micro = [next(batches) for _ in range(config.accum_steps)]
                data_time = time.perf_counter() - tick
                losses = state.step(step, micro, epoch + step_in_epoch / steps_per_epoch, clipped)
                step, step_in_epoch = step + 1, step_in_epoch + 1
                elapsed = time.perf_counter() - tick
                record = {
                    "step": step,
                    "epoch": epoch,
                    **losses,
                    "lr": float(schedules.lr[step - 1]),
                    "weight_decay": float(schedules.weight_decay[step - 1]),
                    "momentum": float(schedules.momentum[step - 1]),
                    "samples_per_s": config.batch_size / max(elapsed, 1e-9),
                    "data_fraction": data_time / max(elapsed, 1e-9),
                    "time": time.perf_counter() - start_time,
                }
                history.append(record)
                if info.is_main:
                    live.update(step, record)
                    if step % config.log_every == 0 or step == total_steps:
                        _append_log(log_path, record)
                stop_signal = _agreed_stop(stops.requested, info, device)
                stopping = stop_signal is not None or (run.stop_after is not None and step >= run.stop_after)
                if step % config.checkpoint_every == 0 or step == total_steps or stopping:
                    next_epoch, next_step = divmod(step, steps_per_epoch)
                    sampler.set_position(next_epoch, next_step * config.accum_steps)
                    save_checkpoint(
                        out_dir / CHECKPOINT_NAME,
                        config,
                        model,
                        optimizer,
                        scaler,
                        sampler,
                        step,
                        info,
                        device,
                    )
                    stops.saved_step = step
                if stop_signal is not None:
                    raise TrainingInterrupted(stop_signal)
                if stopping:
                    return TrainResult(out_dir, step, total_steps, history)
            del batches
    stops.graceful = False  # the export is short: a signal now stops at once (the run resumes into it)
    if info.is_main:
        export_backbone(model, out_dir, config)
        logger.info("Finished %d steps; backbone written to %s", step, backbone_dir(out_dir))
    if info.world_size > 1:
        dist.barrier()
    return TrainResult(out_dir, step, total_steps, history)


def _announce(
    config: TrainConfig, step: int, total: int, per_epoch: int, device: torch.device, out_dir: Path
) -> None:
    """One line before the first step: how many steps (and epochs of how many), the batch, where it runs."""
    epochs = total / per_epoch
    logger.info(
        "training: %s%d steps (%s epoch%s of %d steps, batch %d) on %s into %s",
        f"from step {step} of " if step else "",
        total,
        f"{epochs:g}" if epochs == int(epochs) else f"{epochs:.2f}",
        "" if epochs == 1 else "s",
        per_epoch,
        config.batch_size,
        device,
        out_dir,
    )


class _LoopState:
    """One optimizer step over `accum_steps` micro-batches (scheduling, AMP, DDP sync, clipping, EMA)."""

    def __init__(
        self,
        config: TrainConfig,
        model: PLStitchModel,
        ddp: DistributedDataParallel | None,
        optimizer: torch.optim.Optimizer,
        scaler: torch.amp.GradScaler,
        schedules: Schedules,
        device: torch.device,
        precision: str,
        info: DistInfo,
    ) -> None:
        self.config, self.model, self.ddp = config, model, ddp
        self.optimizer, self.scaler, self.schedules = optimizer, scaler, schedules
        self.device, self.precision, self.info = device, precision, info

    def step(
        self, step: int, micro: list[dict[str, torch.Tensor]], epoch_float: float, clipped: list
    ) -> dict[str, float]:
        config, accum = self.config, self.config.accum_steps
        epoch = int(epoch_float)
        for group in self.optimizer.param_groups:
            group["lr"] = float(self.schedules.lr[step])
            group["weight_decay"] = float(self.schedules.weight_decay[step]) if group["apply_wd"] else 0.0
        jigsaw_weight = ramp_weight(
            config.lambda_jigsaw, epoch_float, config.jigsaw_start_epoch, config.jigsaw_ramp_epochs
        )
        forward = self.ddp if self.ddp is not None else self.model
        totals: dict[str, float] = {}
        for i, batch in enumerate(micro):
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            sync = self.ddp is None or i == accum - 1
            with contextlib.nullcontext() if sync else self.ddp.no_sync():
                with autocast(self.device, self.precision):
                    out = forward(batch, epoch, jigsaw_weight)
                values = self._reduced(out)
                if not all(math.isfinite(v) for v in values.values()):
                    raise TrainingError(
                        f"Non-finite loss at step {step + 1} (epoch {epoch_float:.2f}): {values}. Lower the "
                        "learning rate, use --precision fp32, or check the input frames."
                    )
                self.scaler.scale(out["loss"] / accum).backward()
            for key, value in values.items():
                totals[key] = totals.get(key, 0.0) + value / accum
        self.scaler.unscale_(self.optimizer)
        if config.clip_grad > 0:
            clip_gradients(clipped, config.clip_grad, per_parameter=config.clip_per_parameter)
        if epoch < config.freeze_last_layer_epochs:
            for param in self.model.last_layer_parameters():
                param.grad = None
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        self.model.update_teacher(float(self.schedules.momentum[step]))
        totals["jigsaw_weight"] = jigsaw_weight
        return totals

    def _reduced(self, out: dict[str, torch.Tensor]) -> dict[str, float]:
        """Branch losses averaged over ranks (so every rank sees the same non-finite check)."""
        keys = [k for k in LOSS_KEYS if k in out]
        values = torch.stack([out[k].detach().float() for k in keys])
        if self.info.world_size > 1:
            dist.all_reduce(values)
            values = values / self.info.world_size
        return dict(zip(keys, values.tolist(), strict=True))


@torch.no_grad()
def clip_gradients(params: list[torch.nn.Parameter], max_norm: float, per_parameter: bool = True) -> None:
    """Clip gradient L2 norms to `max_norm`: each parameter on its own (DINO/iBOT) or all together."""
    if not per_parameter:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
        return
    for grad in (p.grad for p in params if p.grad is not None):
        scale = max_norm / (grad.norm(2) + 1e-6)
        grad.mul_(scale.clamp(max=1.0))


def _truncate_log(path: Path, step: int) -> None:
    """Drop log records after `step` (written by a run killed after its last checkpoint)."""
    if not path.is_file():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if line.strip() and json.loads(line).get("step", 0) <= step]
    if len(kept) != len(lines):
        write_text_atomic(path, "".join(line + "\n" for line in kept))


def _append_log(path: Path, record: dict[str, float]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


# --- checkpoints and export ---------------------------------------------------------------------------------


def save_checkpoint(
    path: Path,
    config: TrainConfig,
    model: PLStitchModel,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    sampler: TrainSampler,
    step: int,
    info: DistInfo,
    device: torch.device,
) -> None:
    """Atomically write everything an exact resume needs (every rank's RNG state is gathered on rank 0)."""
    rng = capture_rng(device)
    rng_states = [rng]
    if info.world_size > 1:
        rng_states = [None] * info.world_size
        dist.all_gather_object(rng_states, rng)
    if not info.is_main:
        return
    checkpoint = {
        "format": CHECKPOINT_FORMAT,
        "config": config.to_dict(),
        "step": step,
        "world_size": info.world_size,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
        "sampler": sampler.state_dict(),  # global micro-batch index: valid for any world size at this batch
        "rng": rng_states,
    }
    with atomic_path(path) as tmp:
        torch.save(checkpoint, tmp)


def _restore(
    checkpoint: dict[str, Any],
    model: PLStitchModel,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    sampler: TrainSampler,
    info: DistInfo,
    device: torch.device,
) -> int:
    """Load model, optimizer, scaler and RNG state; returns the step to continue from."""
    try:
        model.load_state_dict(checkpoint["model"], strict=True)
        optimizer.load_state_dict(checkpoint["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise TrainingError(f"Checkpoint does not match the model built from its config: {exc}") from exc
    if "sampler" in checkpoint:
        sampler.load_state_dict(checkpoint["sampler"])
    if checkpoint.get("scaler"):
        scaler.load_state_dict(checkpoint["scaler"])
    rng_states = checkpoint.get("rng", [])
    if len(rng_states) == info.world_size:
        restore_rng(rng_states[info.rank], device)
    else:
        logger.warning(
            "Checkpoint was written by %d processes, resuming with %d: data order is exact, "
            "dropout/drop-path RNG is re-seeded.",
            len(rng_states),
            info.world_size,
        )
    return int(checkpoint["step"])


def export_backbone(model: PLStitchModel, out_dir: Path, config: TrainConfig) -> Path:
    """Teacher ViT in timm format (+ temporal head) under `out_dir/backbone`, which `load_encoder` reads.

    Why atomic (staged folder, then one rename): a run counts as finished exactly when the folder exists.
    """
    from plstitch_eval.hub.temporal_head import save_temporal_head
    from plstitch_eval.hub.timm_format import save_timm_dir
    from plstitch_eval.preprocess import DataConfig

    target = backbone_dir(out_dir)
    staging = temp_dir_beside(target)  # whole folder renamed into place: its presence means "finished"
    try:
        save_timm_dir(model.teacher["backbone"].vit, staging, DataConfig.for_size(config.img_size))
        if "temporal_head" in model.student:
            save_temporal_head(model.student["temporal_head"], staging)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target
