"""PL-Stitch training loop: AdamW + cosine schedules, AMP, DDP (torchrun), accumulation, exact resume, export.

Run directory: `last.ckpt` (everything an exact resume needs; loads with `torch.load(weights_only=True)`),
`backbone/` (teacher ViT in timm format + temporal head; `load_encoder(run_dir)` reads it),
`train_config.json` and `log.jsonl` (one JSON object per logged step). Only rank 0 writes files.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
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

from plstitch_eval.errors import TrainingError
from plstitch_eval.utils.console import console, logger, progress_bar
from plstitch_eval.utils.device import autocast, resolve_device, resolve_precision
from plstitch_eval.utils.distributed import DistInfo, init_distributed, teardown_distributed
from plstitch_eval.utils.io import atomic_path, write_json_atomic, write_text_atomic
from plstitch_train.data import FrameStore, TrainDataset, dataset_videos, discover_videos
from plstitch_train.model import PLStitchModel
from plstitch_train.presets import TrainConfig
from plstitch_train.sampling import TrainSampler
from plstitch_train.schedules import Schedules, ramp_weight

CHECKPOINT_NAME = "last.ckpt"
CONFIG_NAME = "train_config.json"
LOG_NAME = "log.jsonl"
BACKBONE_DIR = "backbone"
CHECKPOINT_FORMAT = 1
RUNTIME_FIELDS = ("device", "num_workers", "checkpoint_every", "log_every", "cache_dir")
LOSS_KEYS = ("loss", "vid", "mim", "jigsaw")


@dataclass
class TrainResult:
    """What a finished (or stopped) run leaves: its folder, the step reached and per-step mean losses."""

    out_dir: Path
    step: int
    total_steps: int
    history: list[dict[str, float]] = field(default_factory=list)


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


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a run checkpoint with `weights_only=True`; TrainingError names the file if it is not ours."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise TrainingError(
            f"Cannot resume: {path} does not exist; pass a run folder or its {CHECKPOINT_NAME}."
        )
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means "not our checkpoint"
        raise TrainingError(f"Cannot read {path} as a training checkpoint: {exc}") from exc
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise TrainingError(f"{path} is not a plstitch training checkpoint (format {CHECKPOINT_FORMAT}).")
    return checkpoint


def _frame_store(config: TrainConfig, out_dir: Path, info: DistInfo) -> FrameStore:
    """Decode the training videos (rank 0 first, so the others only read the cache)."""
    if config.data is not None:
        videos = discover_videos(config.data, folder_fps=config.fps)
    else:
        videos = dataset_videos(config.dataset, config.root, config.split)
    cache_dir = Path(config.cache_dir) if config.cache_dir else out_dir / "frame_cache"

    def build() -> FrameStore:
        return FrameStore.build(
            videos, config.fps, config.frame_size, cache_dir, config.clip_len, config.reverse_time
        )

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
    )


class _LiveLine:
    """Rich progress bar on stderr (rank 0) with per-branch losses, lr, samples/s and ETA.

    When stderr is not a terminal (a log file, CI) the same line is logged every `log_every` steps instead.
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
        elif self.enabled and (step % self.log_every == 0 or step == self.total):
            per_step = (time.perf_counter() - self.started) / max(step - self.start_step, 1)
            eta = per_step * (self.total - step)
            logger.info("step %d/%d  %s  ETA %.0fs", step, self.total, "  ".join(parts), eta)


# --- the loop -----------------------------------------------------------------------------------------------


def train(
    config: TrainConfig | None = None,
    out_dir: str | os.PathLike | None = None,
    *,
    resume: str | os.PathLike | None = None,
    runtime: dict[str, Any] | None = None,
    stop_after: int | None = None,
) -> TrainResult:
    """Train (or resume) a PL-Stitch model; returns the run folder and the per-step losses.

    `resume` restores everything from a checkpoint (its config wins; `runtime` may change only device,
    workers, checkpoint/log cadence). `stop_after` stops after that many optimizer steps as a kill would,
    leaving a checkpoint but no export (used to test exact resume).
    """
    checkpoint = None
    if resume is not None:
        checkpoint = load_checkpoint(resume)
        config = TrainConfig.from_dict(checkpoint["config"])
        resume_path = Path(resume)
        out_dir = out_dir or (resume_path if resume_path.is_dir() else resume_path.parent)
    if config is None or out_dir is None:
        raise TrainingError("train() needs a config and an output folder, or a checkpoint to resume.")
    config = config.replace(**{k: v for k, v in (runtime or {}).items() if k in RUNTIME_FIELDS})
    config.validate()
    out_dir = Path(out_dir)
    device = resolve_device(config.device)
    info, device = init_distributed(device)
    precision = resolve_precision(config.precision, device)
    try:
        return _run(config, out_dir, checkpoint, device, precision, info, stop_after)
    finally:
        teardown_distributed(info)


def _run(
    config: TrainConfig,
    out_dir: Path,
    checkpoint: dict[str, Any] | None,
    device: torch.device,
    precision: str,
    info: DistInfo,
    stop_after: int | None,
) -> TrainResult:
    micro_batch, remainder = divmod(config.batch_size, info.world_size * config.accum_steps)
    if remainder or micro_batch < 1:
        raise TrainingError(
            f"batch_size {config.batch_size} must be a multiple of processes ({info.world_size}) x "
            f"accum_steps ({config.accum_steps})."
        )
    if info.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out_dir / CONFIG_NAME, config.to_dict())
    store = _frame_store(config, out_dir, info)

    seed_everything(config.seed)  # identical initial weights on every rank
    model = PLStitchModel(config).to(device)
    probe_grid = model.student["backbone"].grid_size
    dataset = TrainDataset(
        store,
        config.img_size,
        probe_grid,
        config.mask_ratio,
        need_clip=config.lambda_vid > 0,
        need_mim=config.lambda_mim > 0,
        need_jigsaw=config.lambda_jigsaw > 0,
    )
    sampler = TrainSampler(
        store.lengths,
        batch_size=micro_batch,
        clip_len=config.clip_len,
        min_step=config.min_step,
        max_step=config.max_step,
        fps=config.fps,
        context_seconds=config.context_seconds,
        length_bounds=config.clip_length_bounds,
        counts=config.clips_per_video,
        seed=config.seed,
        rank=info.rank,
        world_size=info.world_size,
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

    step = 0
    seed_everything(config.seed + 1 + info.rank)  # drop path / dropout differ per rank
    if checkpoint is not None:
        step = _restore(checkpoint, model, optimizer, scaler, sampler, info, device)
        if info.is_main:
            _truncate_log(out_dir / LOG_NAME, step)

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
    trainable = [p for group in optimizer.param_groups for p in group["params"]]
    log_path = out_dir / LOG_NAME
    model.train()
    start_time = time.perf_counter()
    live_enabled = info.is_main and not os.environ.get("PLSTITCH_NO_LIVE")
    with _LiveLine(total_steps, step, live_enabled, config.log_every) as live:
        while step < total_steps:
            epoch, step_in_epoch = divmod(step, steps_per_epoch)
            sampler.set_position(epoch, step_in_epoch * config.accum_steps)
            batches = iter(_loader(dataset, sampler, config, device))
            while step_in_epoch < steps_per_epoch and step < total_steps:
                tick = time.perf_counter()
                micro = [next(batches) for _ in range(config.accum_steps)]
                data_time = time.perf_counter() - tick
                losses = state.step(step, micro, epoch + step_in_epoch / steps_per_epoch, trainable)
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
                stopping = stop_after is not None and step >= stop_after
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
                if stopping:
                    return TrainResult(out_dir, step, total_steps, history)
            del batches
    if info.is_main:
        export_backbone(model, out_dir, config)
        logger.info("Finished %d steps; backbone written to %s", step, out_dir / BACKBONE_DIR)
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
        self, step: int, micro: list[dict[str, torch.Tensor]], epoch_float: float, trainable: list
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
            clip_gradients(trainable, config.clip_grad, per_parameter=config.clip_per_parameter)
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
    """Teacher ViT in timm format (+ temporal head) under `out_dir/backbone`, which `load_encoder` reads."""
    from plstitch_eval.hub.data_config import DataConfig
    from plstitch_eval.hub.temporal_head import save_temporal_head
    from plstitch_eval.hub.timm_format import save_timm_dir

    target = out_dir / BACKBONE_DIR
    vit = model.teacher["backbone"].vit
    save_timm_dir(vit, target, DataConfig.for_size(config.img_size))
    if "temporal_head" in model.student:
        save_temporal_head(model.student["temporal_head"], target)
    return target
