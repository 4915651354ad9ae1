"""PL-Stitch training loop: AdamW + cosine schedules, AMP, DDP (torchrun), accumulation, exact resume, export.

Composed of pieces with one job each, in `run/`: `plan` (new, resume, finished, refused or overwritten),
`checkpoint` (last.ckpt and the exported backbone), `log`, `rng`, `signals` (stop at a step boundary) and
`progress`; and the `monitors/` (collapse, k-NN) that watch the run.

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
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import record_function
from torch.utils.data import DataLoader

from plstitch_eval.errors import ConfigError, TrainingError
from plstitch_eval.hub.run_folder import (
    CHECKPOINT_NAME,
    KNN_EVAL_NAME,
    backbone_dir,
    frame_cache_dir,
    is_finished,
)
from plstitch_eval.utils.console import logger
from plstitch_eval.utils.device import autocast, resolve_device, resolve_precision
from plstitch_eval.utils.distributed import DistInfo, init_distributed, teardown_distributed
from plstitch_train.config import RunConfig, TrainConfig
from plstitch_train.data import (
    FrameStore,
    TrainDataset,
    build_training_data,
    micro_batch_size,
    open_frame_store,
)
from plstitch_train.frames_lmdb import LmdbFrameStore
from plstitch_train.model import PLStitchModel
from plstitch_train.monitors.collapse import CollapseMonitor, CollapseStop
from plstitch_train.monitors.knn import KnnMonitor
from plstitch_train.run import plan as run_plan
from plstitch_train.run.checkpoint import (
    CHECKPOINT_FORMAT,
    export_backbone,
    load_training_checkpoint,
    restore_checkpoint,
    save_checkpoint,
)
from plstitch_train.run.log import RunLog
from plstitch_train.run.plan import (
    PATH_FIELDS,
    RUNTIME_FIELDS,
    TrainResult,
    comparable_settings,
    config_differences,
    finished_result,
    plan_run,
    prepare_folder,
    recorded_settings,
    remove_run_files,
    resume_target,
)
from plstitch_train.run.progress import LOSS_KEYS, LiveLine, announce_plan
from plstitch_train.run.rng import capture_rng, restore_rng, seed_everything
from plstitch_train.run.signals import (
    DUPLICATE_SIGNAL_S,
    STOP_SIGNALS,
    StopSignals,
    TrainingInterrupted,
    agreed_stop,
    ignore_stop_signals,
    resume_command,
    stderr_is_terminal,
)
from plstitch_train.sampling import TrainSampler
from plstitch_train.schedules import Schedules, planned_steps, ramp_weight

__all__ = [  # the loop, and the names of the pieces it is composed of (they lived here before)
    "CHECKPOINT_FORMAT",
    "DUPLICATE_SIGNAL_S",
    "PATH_FIELDS",
    "RUNTIME_FIELDS",
    "STOP_SIGNALS",
    "StopSignals",
    "TrainResult",
    "TrainingInterrupted",
    "capture_rng",
    "clip_gradients",
    "comparable_settings",
    "config_differences",
    "export_backbone",
    "load_training_checkpoint",
    "plan_run",
    "recorded_settings",
    "remove_run_files",
    "restore_rng",
    "resume_command",
    "save_checkpoint",
    "seed_everything",
    "train",
]


def _frame_store(config: TrainConfig, out_dir: Path, info: DistInfo) -> FrameStore | LmdbFrameStore:
    """Decode the training videos (rank 0 first, so the others only read the cache)."""
    cache_dir = Path(config.frames.cache_dir) if config.frames.cache_dir else frame_cache_dir(out_dir)

    def build() -> FrameStore | LmdbFrameStore:
        return open_frame_store(config, cache_dir)

    if info.world_size == 1:
        return build()
    store = build() if info.is_main else None
    dist.barrier()
    return store if store is not None else build()


def _loader(dataset: TrainDataset, sampler: TrainSampler, run: RunConfig, device: torch.device) -> DataLoader:
    """DataLoader with its own generator, so creating it never consumes the global RNG (exact resume)."""
    generator = torch.Generator().manual_seed(run.seed)
    return DataLoader(
        dataset,
        batch_sampler=sampler,
        num_workers=run.num_workers,
        pin_memory=device.type == "cuda",
        generator=generator,
        worker_init_fn=ignore_stop_signals if run.num_workers > 0 else None,
    )


def train(
    config: TrainConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    resume: str | os.PathLike | None = None,
    overwrite: bool = False,
    runtime: dict[str, Any] | None = None,
    stop_after: int | None = None,
    plan: str | None = None,
) -> TrainResult:
    """Train a PL-Stitch model into `out_dir`, continuing the run already there; returns the per-step losses.

    A folder holding a run of the same settings (`config_differences`) resumes from its last.ckpt, or, when
    finished, returns at once with `already_finished` and writes nothing; other settings raise TrainingError
    unless `overwrite` (the old run's files go only once the new run is built). `resume` restores from a
    checkpoint whose config wins (`runtime` may change only RUNTIME_FIELDS). `stop_after` stops after that
    many optimizer steps as a kill would, leaving a checkpoint but no export (tests of exact resume).
    `plan` is the decision `run.plan.plan_run` already took for `config` and `out_dir` ("new", "resume",
    "finished" or "overwrite": `launch.plan_launch` passes its own); without it train decides here.
    SIGINT/SIGTERM raise `TrainingInterrupted` after checkpointing at the next step boundary.
    """
    if resume is not None and overwrite:
        raise ConfigError("--resume continues a run and --overwrite replaces it: give one of them.")
    if plan is not None and (plan not in run_plan.PLANS or resume is not None):
        raise ConfigError(f"plan={plan!r}: give one of {', '.join(run_plan.PLANS)}, and no resume with it.")
    checkpoint = None
    if resume is not None:
        out_dir = resume_target(resume, out_dir)
        if is_finished(out_dir):
            return finished_result(out_dir)
        checkpoint = load_training_checkpoint(resume)
        config = TrainConfig.from_dict(checkpoint["config"])
    if config is None or out_dir is None:
        raise TrainingError("train() needs a config and an output folder, or a checkpoint to resume.")
    config = config.replace(**{k: v for k, v in (runtime or {}).items() if k in RUNTIME_FIELDS})
    config.validate()
    out_dir = Path(out_dir)
    if plan is None:
        plan = "resume" if checkpoint is not None else run_plan.plan_run(config, out_dir, overwrite)
    if plan == "finished":
        return finished_result(out_dir)
    if plan == "resume" and checkpoint is None:
        checkpoint = load_training_checkpoint(out_dir)
        if int(os.environ.get("RANK", "0")) == 0:
            logger.info("Resuming %s from step %d.", out_dir, int(checkpoint["step"]))
    device = resolve_device(config.run.device)
    info, device = init_distributed(device)  # a rendezvous: no rank writes before every rank has planned
    precision = resolve_precision(config.run.precision, device)
    stops = StopSignals(
        announce=info.is_main and stderr_is_terminal(),
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
    optim = config.optim
    micro_batch_size(optim, info.world_size)  # a bad batch split fails before any video is decoded
    knn = KnnMonitor(config, out_dir, info.is_main)  # a bad --eval-dataset fails before any decoding
    store = _frame_store(config, out_dir, info)
    knn.prepare(0 if checkpoint is None else int(checkpoint["step"]))  # rank 0 decodes once (or reads back)

    seed_everything(config.run.seed)  # identical initial weights on every rank
    model = PLStitchModel(config).to(device)
    dataset, sampler = build_training_data(
        config, store, model.student["backbone"].grid_size, rank=info.rank, world_size=info.world_size
    )
    steps_per_epoch = sampler.batches_per_epoch // optim.accum_steps
    if steps_per_epoch < 1:
        raise TrainingError(
            f"An epoch holds {sampler.batches_per_epoch} micro-batches, fewer than accum_steps."
        )
    total_steps = planned_steps(optim, steps_per_epoch)
    schedules = Schedules.from_settings(optim, total_steps, steps_per_epoch)
    optimizer = torch.optim.AdamW(model.param_groups(), lr=0.0, **adamw_kernels(device))
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")

    step = 0 if checkpoint is None else int(checkpoint["step"])
    if info.is_main:  # the new run is built: only now may an old one's files go
        prepare_folder(out_dir, config, run.replace, step)
        announce_plan(optim, step, total_steps, steps_per_epoch, device, out_dir)
    seed_everything(config.run.seed + 1 + info.rank)  # drop path / dropout differ per rank
    if checkpoint is not None:
        step = restore_checkpoint(checkpoint, model, optimizer, scaler, sampler, info, device)

    if config.run.compile:
        compile_modules(model)
    ddp = None
    if info.world_size > 1:
        find_unused = config.loss.lambda_jigsaw > 0 and config.loss.jigsaw_start_epoch > 0
        ddp = DistributedDataParallel(
            model,
            device_ids=[device.index] if device.type == "cuda" else None,
            broadcast_buffers=False,
            find_unused_parameters=find_unused,
        )
    state = _LoopState(config, model, ddp, optimizer, scaler, schedules, device, precision, info)
    monitor = CollapseMonitor(model, config)  # on every rank (its own probe batch); the stop is agreed
    history: list[dict[str, float]] = []
    clipped = model.clipped_parameters()  # backbone + iBOT head; the ranking heads are not clipped
    run_log = RunLog(out_dir, start_step=step)  # log.jsonl (+ TensorBoard); closed by the `with` below
    model.train()
    start_time = time.perf_counter()
    live_enabled = info.is_main and not os.environ.get("PLSTITCH_NO_LIVE")
    stops.graceful, stops.total_steps = True, total_steps
    with LiveLine(total_steps, step, live_enabled, config.run.log_every) as live, run_log:
        if step == 0 and knn.enabled:  # the curve's start: the initialisation's k-NN (logged as step 0)
            if info.is_main:
                scores = knn.measure(model.teacher["backbone"].vit, 0, device, precision)
                run_log.append({"step": 0, "epoch": 0, **scores})
            if info.world_size > 1:
                dist.barrier()
        while step < total_steps:
            epoch, step_in_epoch = divmod(step, steps_per_epoch)
            sampler.set_position(epoch, step_in_epoch * optim.accum_steps)
            batches = iter(_loader(dataset, sampler, config.run, device))
            while step_in_epoch < steps_per_epoch and step < total_steps:
                tick = time.perf_counter()
                micro = [next(batches) for _ in range(optim.accum_steps)]
                data_time = time.perf_counter() - tick
                monitor.keep_probe(micro[0])
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
                    "samples_per_s": optim.batch_size / max(elapsed, 1e-9),
                    "data_fraction": data_time / max(elapsed, 1e-9),
                    "time": time.perf_counter() - start_time,
                }
                measures = monitor.measure(step, losses.get("mim"), epoch)
                collapse_stop = False
                if measures is not None:
                    record.update(measures)
                    alarm = monitor.update(measures)
                    monitor.warn_once(step, measures, announce=info.is_main)
                    alarm = alarm and config.run.stop_on_collapse and step < total_steps  # last: export
                    collapse_stop = agreed_stop(1 if alarm else None, info, device) is not None
                if knn.due(step, total_steps):  # rank 0 evaluates; no random number drawn
                    if info.is_main:
                        record.update(knn.measure(model.teacher["backbone"].vit, step, device, precision))
                    if info.world_size > 1:
                        dist.barrier()  # the other ranks wait for it
                history.append(record)
                logged = step % config.run.log_every == 0 or step == total_steps or "knn_acc" in record
                if info.is_main:
                    live.update(step, record, collapsed=monitor.warned)
                    if logged:
                        run_log.append(record)
                stop_signal = agreed_stop(stops.requested, info, device)
                stopping = stop_signal is not None or (run.stop_after is not None and step >= run.stop_after)
                stopping = stopping or collapse_stop
                if step % config.run.checkpoint_every == 0 or step == total_steps or stopping:
                    next_epoch, next_step = divmod(step, steps_per_epoch)
                    sampler.set_position(next_epoch, next_step * optim.accum_steps)
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
                if collapse_stop:
                    if info.is_main and not logged:
                        run_log.append(record)  # the step it stopped at is in the log
                    raise CollapseStop(step, str(out_dir / CHECKPOINT_NAME), resume_command(out_dir, info))
                if stopping:
                    return TrainResult(out_dir, step, total_steps, history)
            del batches
    stops.graceful = False  # the export is short: a signal now stops at once (the run resumes into it)
    if info.is_main:
        export_backbone(model, out_dir, config.model)
        logger.info("Finished %d steps; backbone written to %s", step, backbone_dir(out_dir))
        if knn.best is not None:  # recorded, not used: the backbone is the last step's
            best = knn.best
            logger.info("k-NN best: %.2f at step %d (%s)", best["knn_acc"], best["step"], KNN_EVAL_NAME)
    if info.world_size > 1:
        dist.barrier()
    return TrainResult(out_dir, step, total_steps, history)


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
        """One optimizer step; the losses reach the host once, after the update is queued (one sync a step).

        A non-finite loss is raised with its step: the update it made is never checkpointed.
        """
        loss, optim = self.config.loss, self.config.optim
        accum, epoch = optim.accum_steps, int(epoch_float)
        for group in self.optimizer.param_groups:
            group["lr"] = float(self.schedules.lr[step])
            group["weight_decay"] = float(self.schedules.weight_decay[step]) if group["apply_wd"] else 0.0
        jigsaw_weight = ramp_weight(
            loss.lambda_jigsaw, epoch_float, loss.jigsaw_start_epoch, loss.jigsaw_ramp_epochs
        )
        forward = self.ddp if self.ddp is not None else self.model
        totals: torch.Tensor | None = None
        keys: list[str] = []
        for i, batch in enumerate(micro):
            batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
            sync = self.ddp is None or i == accum - 1
            with contextlib.nullcontext() if sync else self.ddp.no_sync():
                with autocast(self.device, self.precision):
                    out = forward(batch, epoch, jigsaw_weight)
                keys = [k for k in LOSS_KEYS if k in out]
                values = torch.stack([out[k].detach().float() for k in keys]) / accum
                totals = values if totals is None else totals + values
                with record_function("plstitch:backward"):
                    self.scaler.scale(out["loss"] / accum).backward()
        with record_function("plstitch:clip"):
            self.scaler.unscale_(self.optimizer)
            if optim.clip_grad > 0:
                clip_gradients(clipped, optim.clip_grad, per_parameter=optim.clip_per_parameter)
        if epoch < optim.freeze_last_layer_epochs:
            for param in self.model.last_layer_parameters():
                param.grad = None
        with record_function("plstitch:optimizer"):
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.optimizer.zero_grad(set_to_none=True)
        with record_function("plstitch:ema"):
            self.model.update_teacher(float(self.schedules.momentum[step]))
        with record_function("plstitch:loss-sync"):
            result = self._reduced(keys, totals)
        if not all(math.isfinite(v) for v in result.values()):
            raise TrainingError(
                f"Non-finite loss at step {step + 1} (epoch {epoch_float:.2f}): {result}. Lower the "
                "learning rate, use --precision fp32, or check the input frames."
            )
        result["jigsaw_weight"] = jigsaw_weight
        return result

    def _reduced(self, keys: list[str], totals: torch.Tensor) -> dict[str, float]:
        """Branch losses averaged over ranks (so every rank sees the same non-finite check); the host sync."""
        if self.info.world_size > 1:
            dist.all_reduce(totals)
            totals = totals / self.info.world_size
        return dict(zip(keys, totals.tolist(), strict=True))


def adamw_kernels(device: torch.device) -> dict[str, bool]:
    """AdamW's implementation: the fused CUDA kernel on a GPU (one launch for all parameters), torch's
    default elsewhere (so CPU runs compute exactly as before)."""
    return {"fused": True} if device.type == "cuda" else {}


def compile_modules(model: PLStitchModel) -> None:
    """`torch.compile` every student and teacher module in place (`--compile`): fused kernels on a GPU.

    Why in place (`nn.Module.compile`): state-dict keys stay as they are, so checkpoints and exports do not
    change; the first steps are slower while each input shape compiles.
    """
    for part in (model.student, model.teacher):
        for module in part.values():
            module.compile()


@torch.no_grad()
def clip_gradients(params: list[torch.nn.Parameter], max_norm: float, per_parameter: bool = True) -> None:
    """Clip gradient L2 norms to `max_norm`: each parameter on its own (DINO/iBOT) or all together."""
    if not per_parameter:
        torch.nn.utils.clip_grad_norm_(params, max_norm)
        return
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    norms = torch.stack(torch._foreach_norm(grads, 2))  # one launch per dtype/device group on a GPU
    scales = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    torch._foreach_mul_(grads, list(scales.unbind()))
